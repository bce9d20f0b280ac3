export * from './clock';
export * from './errors';
export * from './error-status';
export * from './engine';
export * from './catalog';
export * from './node';
export * from './replica';
export * from './admin-api';
