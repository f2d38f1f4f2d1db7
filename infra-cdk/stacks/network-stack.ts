import { RemovalPolicy, Stack, type StackProps } from 'aws-cdk-lib';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as logs from 'aws-cdk-lib/aws-logs';
import type { Construct } from 'constructs';
import type { MsgxSettings } from '../config.ts';

export interface NetworkStackProps extends StackProps {
  msgx: MsgxSettings;
}

/**
 * The VPC, its interface endpoints and the functions' security group. The database's and the
 * cluster's groups live in their own stacks and admit this one: rules then point only "down" the
 * stack dependency order, never creating a cross-stack reference cycle.
 */
export class NetworkStack extends Stack {
  readonly vpc: ec2.Vpc;
  /** Every msgx function (and the migration trigger) runs with this group. */
  readonly functionSg: ec2.SecurityGroup;

  constructor(scope: Construct, id: string, props: NetworkStackProps) {
    super(scope, id, props);
    const { settings, mailbox } = props.msgx;

    this.vpc = new ec2.Vpc(this, 'Vpc', {
      ipAddresses: ec2.IpAddresses.cidr(settings.vpcCidr),
      // Two AZs keep the stack environment-agnostic (no AZ lookup) and match the broker count.
      maxAzs: 2,
      natGateways: settings.natGateways,
      subnetConfiguration: [
        { name: 'public', subnetType: ec2.SubnetType.PUBLIC, cidrMask: 24 },
        { name: 'app', subnetType: ec2.SubnetType.PRIVATE_WITH_EGRESS, cidrMask: 22 },
        { name: 'data', subnetType: ec2.SubnetType.PRIVATE_ISOLATED, cidrMask: 24 },
      ],
    });
    const flowLogGroup = new logs.LogGroup(this, 'FlowLogs', {
      retention: settings.functions.logRetentionDays,
      removalPolicy: RemovalPolicy.DESTROY,
    });
    this.vpc.addFlowLog('FlowLog', {
      destination: ec2.FlowLogDestination.toCloudWatchLogs(flowLogGroup),
      trafficType: ec2.FlowLogTrafficType.REJECT,
    });

    this.functionSg = new ec2.SecurityGroup(this, 'FunctionSg', {
      vpc: this.vpc,
      description: 'msgx functions',
      // Outbound stays open: webhooks and tx check-back go to origins configured at run time.
      allowAllOutbound: true,
    });

    // The shared mailbox is not ours: open its group to us when we are told which one it is.
    if (mailbox.securityGroupId) {
      const mailboxSg = ec2.SecurityGroup.fromSecurityGroupId(this, 'MailboxSg', mailbox.securityGroupId, { mutable: true });
      mailboxSg.addIngressRule(this.functionSg, ec2.Port.tcp(mailbox.port), 'msgx functions to the shared mailbox');
    }

    const endpointSg = new ec2.SecurityGroup(this, 'EndpointSg', {
      vpc: this.vpc,
      description: 'msgx interface endpoints',
      allowAllOutbound: false,
    });
    endpointSg.addIngressRule(ec2.Peer.ipv4(settings.vpcCidr), ec2.Port.tcp(443), 'HTTPS from inside the VPC');
    const subnets = { subnetType: ec2.SubnetType.PRIVATE_WITH_EGRESS };
    // The calls msgx makes on every cold start or every loop stay inside the VPC.
    const interfaces: Record<string, ec2.InterfaceVpcEndpointAwsService> = {
      SecretsManager: ec2.InterfaceVpcEndpointAwsService.SECRETS_MANAGER,
      Lambda: ec2.InterfaceVpcEndpointAwsService.LAMBDA,
      Scheduler: new ec2.InterfaceVpcEndpointAwsService('scheduler'),
      Logs: ec2.InterfaceVpcEndpointAwsService.CLOUDWATCH_LOGS,
      Sts: ec2.InterfaceVpcEndpointAwsService.STS,
    };
    // Everything else (X-Ray, the Kafka control plane, webhooks) leaves through the NAT gateway.
    for (const [name, service] of Object.entries(interfaces)) {
      this.vpc.addInterfaceEndpoint(name, { service, subnets, securityGroups: [endpointSg], privateDnsEnabled: true, open: false });
    }
    this.vpc.addGatewayEndpoint('S3', { service: ec2.GatewayVpcEndpointAwsService.S3 });
  }
}
