/** Where things are, from this package's point of view. */

import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";

/** clients/openclaw */
export const PACKAGE_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
/** clients/openclaw/plugin: the plugin OpenClaw loads. */
export const PLUGIN_DIR = resolve(PACKAGE_ROOT, "plugin");
/** The repository root (holds .venv and memoryd). */
export const REPO_ROOT = resolve(PACKAGE_ROOT, "../..");
/** The OpenClaw CLI installed as this package's dev dependency. */
export const OPENCLAW_CLI = resolve(PACKAGE_ROOT, "node_modules/openclaw/openclaw.mjs");
