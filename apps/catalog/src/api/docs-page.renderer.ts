// Renders an OpenAPI document as one self-contained HTML page: no script, no CDN, no external
// stylesheet, so it works on an air-gapped cluster and leaks nothing.

interface Operation {
  summary?: string;
  description?: string;
  parameters?: readonly Parameter[];
  requestBody?: { description?: string; content?: Record<string, unknown> };
  responses?: Record<string, { description?: string }>;
  security?: readonly unknown[];
}
interface Parameter {
  name: string;
  in: string;
  required?: boolean;
  description?: string;
}
interface Document {
  info: { title: string; version: string; description?: string };
  paths: Record<string, Record<string, unknown>>;
}

const METHODS = ['get', 'put', 'post', 'delete', 'patch'] as const;

/** HTML-escapes text for element content and attribute values. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c] as string);
}

/** `text` with `code` spans for backticks, escaped. */
function inline(text: string | undefined): string {
  if (!text) return '';
  return escapeHtml(text).replace(/`([^`]+)`/g, '<code>$1</code>');
}

/** The docs page: every path and method of `doc`, with parameters, bodies and responses. */
export function renderDocsPage(doc: Document): string {
  const sections: string[] = [];
  for (const [path, item] of Object.entries(doc.paths)) {
    const shared = (item.parameters as readonly Parameter[] | undefined) ?? [];
    for (const method of METHODS) {
      const op = item[method] as Operation | undefined;
      if (!op) continue;
      const params = [...shared, ...(op.parameters ?? [])];
      const rows = params
        .map((p) => `<tr><td><code>${escapeHtml(p.name)}</code></td><td>${escapeHtml(p.in)}${p.required ? ', required' : ''}</td><td>${inline(p.description)}</td></tr>`)
        .join('');
      const responses = Object.entries(op.responses ?? {})
        .map(([status, r]) => `<tr><td><code>${escapeHtml(status)}</code></td><td>${inline(r.description)}</td></tr>`)
        .join('');
      const body = op.requestBody
        ? `<p><b>Body</b>: ${Object.keys(op.requestBody.content ?? {}).map((t) => `<code>${escapeHtml(t)}</code>`).join(', ')}. ${inline(op.requestBody.description)}</p>`
        : '';
      sections.push(
        `<section id="${escapeHtml(`${method}-${path}`)}"><h2><span class="m ${method}">${method.toUpperCase()}</span> <code>${escapeHtml(path)}</code></h2>` +
          `<p>${inline(op.summary)}${op.security && op.security.length === 0 ? ' <i>(no token needed)</i>' : ''}</p>` +
          (op.description ? `<p>${inline(op.description)}</p>` : '') +
          (rows ? `<table><tr><th>parameter</th><th>in</th><th></th></tr>${rows}</table>` : '') +
          body +
          (responses ? `<table><tr><th>status</th><th>meaning</th></tr>${responses}</table>` : '') +
          '</section>',
      );
    }
  }
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>${escapeHtml(doc.info.title)}</title>
<style>
body{font:15px/1.45 system-ui,sans-serif;max-width:960px;margin:2em auto;padding:0 1em;color:#1b1b1b}
code{background:#f2f2f2;padding:0 .25em;border-radius:3px}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ddd;padding:.25em .5em;text-align:left;vertical-align:top}
section{border-top:1px solid #ccc;margin-top:1.5em}.m{font-family:monospace;padding:0 .4em;border-radius:3px;color:#fff}
.get{background:#2b6cb0}.put{background:#b7791f}.post{background:#2f855a}.delete{background:#c53030}.patch{background:#6b46c1}
</style></head><body>
<h1>${escapeHtml(doc.info.title)} <small>v${escapeHtml(doc.info.version)}</small></h1>
<p>${inline(doc.info.description)}</p>
<p>Requests to <code>/v1/catalog</code> need <code>Authorization: Bearer &lt;token&gt;</code>. Errors are <code>application/problem+json</code> listing every problem with its path. The machine-readable description is at <a href="/openapi.json">/openapi.json</a>.</p>
${sections.join('\n')}
</body></html>
`;
}
