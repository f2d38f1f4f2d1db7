import type { Rule } from 'eslint';

/** msgx/no-import-cycle: relative import cycles, type-only imports included. */
export declare const noImportCycle: Rule.RuleModule;
declare const plugin: { rules: { 'no-import-cycle': Rule.RuleModule } };
export default plugin;
