import { join } from 'node:path';

/**
 * Where the built dashboard (index.html, app.js, app.css) is: `dist/public` of this lib, written by
 * `tools/bundle-dashboard.js`. The gateway serves it; this entry point is all the server side needs.
 */
export const DASHBOARD_PUBLIC_DIR = join(__dirname, 'public');

/** The files the bundle writes; anything else under the dashboard's path is a page route. */
export const DASHBOARD_ASSETS = ['index.html', 'app.js', 'app.css'] as const;
