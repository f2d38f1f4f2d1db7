/** Types for the one export of eslint.config.mjs that a test reads. */
export declare const TYPE_AWARE_RULES: Record<string, unknown>;
declare const config: unknown;
export default config;
