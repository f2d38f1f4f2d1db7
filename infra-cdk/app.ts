import { App } from 'aws-cdk-lib';
import { buildMsgx } from './build.ts';
import { SettingsError } from './config.ts';

// `npx cdk synth|deploy [-c stage=prod] -c mailboxHost=… -c mailboxSecretArn=…`; see docs/deploy.md.
const app = new App();
try {
  buildMsgx(app);
} catch (err) {
  // Settings are the user's to fix: one message listing all of them, no stack trace.
  if (!(err instanceof SettingsError)) throw err;
  console.error(err.message);
  process.exit(1);
}
app.synth();
