import 'reflect-metadata';
import { RequestMethod } from '@nestjs/common';
import { METHOD_METADATA, PATH_METADATA } from '@nestjs/common/constants';
import { HealthController } from '@llmgw/observability';
import { describe, expect, it } from 'vitest';
import { CatalogModule, type CatalogModuleOptions } from '../catalog.module';
import { CatalogApiController } from './catalog-api.controller';
import { escapeHtml, renderDocsPage } from './docs-page.renderer';
import { OPENAPI_DOCUMENT } from './openapi.document';

/** Every route Nest registers for these controllers, as `METHOD /openapi/path`. */
function registeredRoutes(controllers: (new (...args: never[]) => unknown)[]): string[] {
  const routes: string[] = [];
  for (const controller of controllers) {
    const base = String(Reflect.getMetadata(PATH_METADATA, controller) ?? '/');
    for (const key of Object.getOwnPropertyNames(controller.prototype)) {
      const handler = (controller.prototype as Record<string, unknown>)[key];
      if (typeof handler !== 'function' || key === 'constructor') continue;
      const path = Reflect.getMetadata(PATH_METADATA, handler) as string | undefined;
      const method = Reflect.getMetadata(METHOD_METADATA, handler) as RequestMethod | undefined;
      if (path === undefined || method === undefined) continue;
      const full = `/${[base, path].map((p) => p.replace(/^\/+|\/+$/g, '')).filter(Boolean).join('/')}`.replace(/:(\w+)/g, '{$1}');
      routes.push(`${RequestMethod[method]} ${full}`);
    }
  }
  return routes.sort();
}

function documentedRoutes(): string[] {
  const routes: string[] = [];
  for (const [path, item] of Object.entries(OPENAPI_DOCUMENT.paths)) {
    for (const method of ['get', 'put', 'post', 'delete', 'patch']) if (method in item) routes.push(`${method.toUpperCase()} ${path}`);
  }
  return routes.sort();
}

describe('OpenAPI document', () => {
  it('describes exactly the routes the app registers', () => {
    // Every controller the app module mounts, and the health routes the observability module adds.
    const mounted = CatalogModule.forRoot({} as CatalogModuleOptions).controllers as (new (...args: never[]) => unknown)[];
    expect(mounted).toContain(CatalogApiController);
    const registered = registeredRoutes([...mounted, HealthController]);
    expect(registered).toContain('PUT /v1/catalog/models/{name}');
    expect(documentedRoutes()).toEqual(registered);
  });

  it('declares every path parameter it uses and resolves every schema reference', () => {
    const text = JSON.stringify(OPENAPI_DOCUMENT);
    for (const [, name] of text.matchAll(/"#\/components\/schemas\/(\w+)"/g)) {
      expect(OPENAPI_DOCUMENT.components.schemas, name).toHaveProperty(name);
    }
    for (const [path, item] of Object.entries(OPENAPI_DOCUMENT.paths)) {
      const declared = JSON.stringify(item);
      for (const [, param] of path.matchAll(/\{(\w+)\}/g)) expect(declared, path).toContain(`"name":"${param}","in":"path"`);
    }
  });

  it('renders a docs page with every route and no script or outside resource', () => {
    const html = renderDocsPage(OPENAPI_DOCUMENT as unknown as Parameters<typeof renderDocsPage>[0]);
    for (const route of documentedRoutes()) {
      const [method, path] = route.split(' ');
      expect(html).toContain(`<span class="m ${method.toLowerCase()}">${method}</span> <code>${path}</code>`);
    }
    expect(html).not.toMatch(/<script|<link|src=/);
    expect(escapeHtml(`<a href="x">'&'</a>`)).toBe('&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;');
  });
});
