/** True for request targets the OpenAI proxy answers (everything under `/v1`). */
export function isApiPath(url: string | undefined): boolean {
  return url !== undefined && url.startsWith('/v1') && (url.length === 3 || url[3] === '/' || url[3] === '?');
}
