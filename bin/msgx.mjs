#!/usr/bin/env node
// The msgx CLI. Sources are TypeScript; tsx compiles them on the fly (no build step).
import { register } from 'tsx/esm/api';

register();
await import('../lib/cli/main.ts');
