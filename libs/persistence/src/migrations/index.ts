import { ReadModel1764400000000 } from './1764400000000-read-model';

export const MIGRATIONS = [ReadModel1764400000000];
