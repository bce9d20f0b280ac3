export * from './limiter.port';
export * from './memory.limiter';
export * from './redis.limiter';
export * from './shared.limiter';
