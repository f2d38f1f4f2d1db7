import { App } from 'aws-cdk-lib';
import { buildMsgx } from './build.ts';

// `npx cdk synth|deploy [-c stage=prod] [-c mailboxHost=… -c mailboxSecretArn=…]`; see docs/deploy.md.
const app = new App();
buildMsgx(app);
app.synth();
