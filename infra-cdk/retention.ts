import { RemovalPolicy } from 'aws-cdk-lib';

/** The stage whose data outlives its stacks (docs/deploy.md "Retention"). */
export const RETAINING_STAGE = 'prod';

/**
 * What a stack deletion does to the stage's data that has no snapshot of its own: the MSK cluster
 * and its configuration, the secrets, the log groups. Prod keeps them (an operator deletes them by
 * hand once sure); every other stage is disposable.
 */
export function dataRemovalPolicy(stage: string): RemovalPolicy {
  return stage === RETAINING_STAGE ? RemovalPolicy.RETAIN : RemovalPolicy.DESTROY;
}
