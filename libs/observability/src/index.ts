export * from './health.controller';
export * from './http-app.bootstrap';
export * from './logger.factory';
export * from './metrics.registry';
export * from './nest-logger.adapter';
export * from './observability.module';
export * from './readiness.service';
export * from './problem.filter';
