export * from './config.error';
export * from './config.loader';
export * from './env-var.schema';
export * from './shared.config';
export * from './grpc-transport.config';
