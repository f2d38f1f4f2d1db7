import { Validations } from 'aws-cdk-lib';
import type { IConstruct } from 'constructs';

export interface NagAcknowledgment {
  /** Rule id, e.g. `AwsSolutions-IAM5`. */
  id: string;
  /** Why the finding is acceptable here; required, and shown in the validation report. */
  reason: string;
  /** Findings of the rule this covers (cdk-nag v3 acknowledges each one as `id[finding]`). */
  appliesTo?: string[];
}

/**
 * Acknowledge cdk-nag findings on a construct and everything under it (cdk-nag v3 reads CDK's
 * `Validations` acknowledgments walking up from each resource).
 */
export function acknowledge(scope: IConstruct, items: NagAcknowledgment[]): void {
  for (const item of items) {
    if (!item.reason.trim()) throw new Error(`nag acknowledgment ${item.id} needs a reason`);
    const ids = item.appliesTo?.length ? item.appliesTo.map((a) => `${item.id}[${a}]`) : [item.id];
    for (const id of ids) Validations.of(scope).acknowledge({ id, reason: item.reason });
  }
}
