/** What an admin credential may do: `read` (status, nodes, usage, catalog and keys as they are) or `write` (every change). */
export type AdminScope = 'read' | 'write';

export const ADMIN_SCOPES: readonly AdminScope[] = ['read', 'write'];
