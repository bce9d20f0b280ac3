import { Controller, Get, Header } from '@nestjs/common';
import { renderDocsPage } from './docs-page.renderer';
import { OPENAPI_DOCUMENT } from './openapi.document';

const DOCS_HTML = renderDocsPage(OPENAPI_DOCUMENT as unknown as Parameters<typeof renderDocsPage>[0]);

/** The API's own description: `/openapi.json` (OpenAPI 3.1) and `/docs` (HTML). Public: no token. */
@Controller()
export class DocsController {
  @Get('openapi.json')
  openapi(): typeof OPENAPI_DOCUMENT {
    return OPENAPI_DOCUMENT;
  }

  @Get('docs')
  @Header('content-type', 'text/html; charset=utf-8')
  @Header('content-security-policy', "default-src 'none'; style-src 'unsafe-inline'")
  docs(): string {
    return DOCS_HTML;
  }
}
