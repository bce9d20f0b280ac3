export * from './candidate';
export * from './filters';
export * from './scorers';
export * from './picker';
export * from './admission';
export * from './circuit-breaker';
export * from './drain-rate';
export * from './scrape-health';
