// Deliberately breaks the dependency rules (placement may import domain and catalog only).
import { openStore } from '@llmgw/store';

export const broken = openStore;
