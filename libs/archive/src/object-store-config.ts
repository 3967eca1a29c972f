import { LocalObjectStore } from './local-object-store';
import type { ObjectStore } from './object-store';
import { S3ObjectStore, type S3ObjectStoreOptions } from './s3-object-store';

export type ObjectStoreConfig = { kind: 'local'; dir: string } | ({ kind: 's3' } & S3ObjectStoreOptions);

export function createObjectStore(config: ObjectStoreConfig): ObjectStore {
  return config.kind === 's3' ? new S3ObjectStore(config) : new LocalObjectStore(config.dir);
}

/** The settings of libs/config's platformSpec this lib reads, named structurally so it need not depend on it. */
export interface ObjectStoreSettings {
  OBJECT_STORE_DIR: string;
  OBJECT_STORE_S3_BUCKET: string;
  OBJECT_STORE_S3_ENDPOINT: string;
  OBJECT_STORE_S3_REGION: string;
  OBJECT_STORE_S3_FORCE_PATH_STYLE: boolean;
}

/**
 * No bucket means the local directory. Credentials come from the AWS SDK's default chain
 * (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, a profile, an instance or pod role).
 */
export function objectStoreConfigOf(settings: ObjectStoreSettings): ObjectStoreConfig {
  if (!settings.OBJECT_STORE_S3_BUCKET) return { kind: 'local', dir: settings.OBJECT_STORE_DIR };
  return {
    kind: 's3',
    bucket: settings.OBJECT_STORE_S3_BUCKET,
    endpoint: settings.OBJECT_STORE_S3_ENDPOINT || undefined,
    region: settings.OBJECT_STORE_S3_REGION,
    forcePathStyle: settings.OBJECT_STORE_S3_FORCE_PATH_STYLE,
  };
}
