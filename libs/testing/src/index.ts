export * from './fake-clock';
export * from './free-port';
export * from './process.harness';
export * from './promtool';
export * from './redis.harness';
export * from './repo-paths';
export * from './wait-for';
