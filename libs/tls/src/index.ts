export * from './certificate.factory';
export * from './grpc.credentials';
export * from './peer-identity';
export * from './pem-pair.files';
