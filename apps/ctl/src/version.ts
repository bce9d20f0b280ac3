// The one version is the root package.json's; the build compiles it into the bundle, so the
// installed CLI needs no repository to read it from.
// eslint-disable-next-line @nx/enforce-module-boundaries
import { version } from '../../../package.json';

/** The version `llmgw --version` prints. */
export const CLI_VERSION: string = version;
