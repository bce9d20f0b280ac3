export * from './lease-store.port';
export * from './leadership.port';
export * from './leader.elector';
export * from './always-leader.elector';
export * from './leader.follower';
