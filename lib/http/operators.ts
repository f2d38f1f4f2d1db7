import { OPERATOR_ROLE_ARN } from '../constants.ts';

/**
 * Who may call the admin routes in the cloud: the IAM roles of this stage's operators
 * (MSGX_OPERATOR_PRINCIPALS). API Gateway proves the caller's identity (SigV4, the routes' IAM
 * authorizer); being allowed to invoke the API does not make a caller an operator, since an
 * upstream system's role commonly may invoke the whole API. The twin does not use this (loopback
 * or MSGX_ADMIN_TOKEN, lib/http/node.ts).
 */

/** A caller acting as a role: `arn:<partition>:sts::<account>:assumed-role/<name>/<session>`. */
const ASSUMED_ROLE = /^arn:(aws|aws-cn|aws-us-gov|aws-iso|aws-iso-b):sts::(\d{12}):assumed-role\/([\w+=,.@-]{1,64})\/([\w+=,.@-]{2,64})$/;

export type OperatorCheck = { ok: true; actor: string } | { ok: false; reason: string };

/**
 * The role an ARN stands for, keyed by partition, account and role name: a role's name is unique
 * in its account, and a session's ARN drops the role's path, so the path cannot be compared.
 */
function roleOf(arn: string): { key: string; session?: string } | undefined {
  const role = OPERATOR_ROLE_ARN.exec(arn);
  if (role) return { key: `${role[1]}:${role[2]}:${role[3]}` };
  const assumed = ASSUMED_ROLE.exec(arn);
  if (assumed) return { key: `${assumed[1]}:${assumed[2]}:${assumed[3]}`, session: assumed[4] };
  return undefined;
}

/**
 * Is the IAM caller `callerArn` one of the `allowed` roles? The actor for audit_log is the listed
 * role ARN, with the session name when the caller is a session of it (IAM Identity Center puts the
 * person's user name there), so two operators sharing a role are told apart.
 */
export function checkOperator(callerArn: string | undefined, allowed: readonly string[]): OperatorCheck {
  if (!callerArn) return { ok: false, reason: 'admin route: the request carries no IAM identity; sign it with SigV4 as an operator role' };
  if (allowed.length === 0)
    return {
      ok: false,
      reason: 'admin route: no operator roles are configured for this stage (MSGX_OPERATOR_PRINCIPALS), so nobody is an operator',
    };
  const caller = roleOf(callerArn);
  if (!caller)
    return {
      ok: false,
      reason: `admin route: ${callerArn.slice(0, 300)} is not an IAM role or a session of one; operators call as a role listed in MSGX_OPERATOR_PRINCIPALS`,
    };
  const listed = allowed.find((a) => roleOf(a)?.key === caller.key);
  if (!listed)
    return {
      ok: false,
      reason: `admin route: ${callerArn.slice(0, 300)} is not an operator (its role is not in MSGX_OPERATOR_PRINCIPALS)`,
    };
  return { ok: true, actor: caller.session ? `${listed} (session ${caller.session})` : listed };
}
