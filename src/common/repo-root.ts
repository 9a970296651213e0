import * as path from 'node:path';

/** The repository (or installed package): two levels up from src/common, three from dist/src/common. */
const UP = path.resolve(__dirname, '../..');
export const ROOT = path.basename(UP) === 'dist' ? path.dirname(UP) : UP;
