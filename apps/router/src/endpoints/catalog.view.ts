import type { ModelView } from '@llmgw/domain';

/** One row of `GET /v1/models`: a served name or an alias, and the model it resolves to. */
export interface ListedModel {
  readonly id: string;
  readonly model: string;
}

/**
 * The router's immutable catalog view: resolves a request's `model` (name or alias) to the
 * canonical model. Replaced as a whole when a new snapshot arrives; readers keep the one they took.
 */
export class CatalogView {
  static readonly EMPTY = new CatalogView([]);

  private readonly byName = new Map<string, ModelView>();
  readonly listed: readonly ListedModel[];

  constructor(readonly models: readonly ModelView[]) {
    const listed: ListedModel[] = [];
    for (const m of models) {
      this.byName.set(m.name, m);
      listed.push({ id: m.name, model: m.name });
    }
    // Aliases never shadow a canonical name, and the first model claiming an alias keeps it.
    for (const m of models) {
      for (const alias of m.aliases) {
        if (this.byName.has(alias)) continue;
        this.byName.set(alias, m);
        listed.push({ id: alias, model: m.name });
      }
    }
    this.listed = listed;
  }

  /** The model a client's `model` value names, or undefined when the catalog has no such name or alias. */
  resolve(name: string): ModelView | undefined {
    return this.byName.get(name);
  }

  /** The canonical model of this exact name (aliases not considered). */
  model(name: string): ModelView | undefined {
    const m = this.byName.get(name);
    return m !== undefined && m.name === name ? m : undefined;
  }
}
