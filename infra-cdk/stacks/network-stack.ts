import { CfnOutput, Fn, Stack, type StackProps } from 'aws-cdk-lib';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as logs from 'aws-cdk-lib/aws-logs';
import type { Construct } from 'constructs';
import type { MsgxSettings } from '../config.ts';
import { dataRemovalPolicy } from '../retention.ts';

export interface NetworkStackProps extends StackProps {
  msgx: MsgxSettings;
}

/**
 * The VPC (created, or an existing one from `stages.<stage>.existing.vpc`), its interface
 * endpoints and the functions' security group. The database's and the cluster's groups live in
 * their own stacks and admit this one: rules then point only "down" the stack dependency order,
 * never creating a cross-stack reference cycle.
 */
export class NetworkStack extends Stack {
  readonly vpc: ec2.IVpc;
  /** Every msgx function (and the migration trigger) runs with this group. */
  readonly functionSg: ec2.ISecurityGroup;
  /** Where the functions run (private, with egress). */
  readonly appSubnets: ec2.SubnetSelection;
  /** Where a database or brokers msgx creates are placed. */
  readonly dataSubnets: ec2.SubnetSelection;
  private azCount?: number;

  constructor(scope: Construct, id: string, props: NetworkStackProps) {
    super(scope, id, props);
    const { settings, mailbox } = props.msgx;
    const existing = settings.existing.vpc;
    this.azCount = settings.azs;
    const net = existing ? this.importVpc(existing) : this.createVpc(props.msgx);
    ({ vpc: this.vpc, appSubnets: this.appSubnets, dataSubnets: this.dataSubnets } = net);

    this.functionSg = new ec2.SecurityGroup(this, 'FunctionSg', {
      vpc: this.vpc,
      description: 'msgx functions',
      // Outbound stays open: webhooks and tx check-back go to origins configured at run time.
      allowAllOutbound: true,
    });
    new CfnOutput(this, 'FunctionSecurityGroupId', {
      value: this.functionSg.securityGroupId,
      description: 'Allow this group on the shared mailbox (if mailboxSecurityGroupId was not given)',
    });
    // The shared mailbox is not ours: open its group to us when we are told which one it is.
    if (mailbox.securityGroupId) {
      const mailboxSg = ec2.SecurityGroup.fromSecurityGroupId(this, 'MailboxSg', mailbox.securityGroupId, { mutable: true });
      mailboxSg.addIngressRule(this.functionSg, ec2.Port.tcp(mailbox.port), 'msgx functions to the shared mailbox');
    }
    if (net.createEndpoints) this.addEndpoints(net.cidr, { gateway: !existing });
  }

  /** An existing VPC from attributes, not a lookup: synth stays offline and needs no account context. */
  private importVpc(existing: NonNullable<MsgxSettings['settings']['existing']['vpc']>) {
    const vpc = ec2.Vpc.fromVpcAttributes(this, 'Vpc', {
      vpcId: existing.id,
      vpcCidrBlock: existing.cidr,
      availabilityZones: existing.availabilityZones,
      privateSubnetIds: existing.appSubnetIds,
      isolatedSubnetIds: existing.dataSubnetIds,
    });
    const data = existing.dataSubnetIds ?? existing.appSubnetIds;
    return {
      vpc,
      appSubnets: { subnets: existing.appSubnetIds.map((s, i) => ec2.Subnet.fromSubnetId(this, `App${i}`, s)) },
      dataSubnets: { subnets: data.map((s, i) => ec2.Subnet.fromSubnetId(this, `Data${i}`, s)) },
      cidr: existing.cidr,
      createEndpoints: existing.createEndpoints ?? false,
    };
  }

  private createVpc(msgx: MsgxSettings) {
    const { settings } = msgx;
    const vpc = new ec2.Vpc(this, 'Vpc', {
      ipAddresses: ec2.IpAddresses.cidr(settings.vpcCidr),
      // AZs come from Fn::GetAZs (see availabilityZones below): no lookup, any region.
      maxAzs: settings.azs,
      natGateways: settings.natGateways,
      subnetConfiguration: [
        { name: 'public', subnetType: ec2.SubnetType.PUBLIC, cidrMask: 24 },
        { name: 'app', subnetType: ec2.SubnetType.PRIVATE_WITH_EGRESS, cidrMask: 22 },
        { name: 'data', subnetType: ec2.SubnetType.PRIVATE_ISOLATED, cidrMask: 24 },
      ],
    });
    const flowLogGroup = new logs.LogGroup(this, 'FlowLogs', {
      retention: settings.functions.logRetentionDays,
      removalPolicy: dataRemovalPolicy(msgx.stage),
    });
    vpc.addFlowLog('FlowLog', {
      destination: ec2.FlowLogDestination.toCloudWatchLogs(flowLogGroup),
      trafficType: ec2.FlowLogTrafficType.REJECT,
    });
    return {
      vpc,
      appSubnets: { subnetType: ec2.SubnetType.PRIVATE_WITH_EGRESS },
      dataSubnets: { subnetType: ec2.SubnetType.PRIVATE_ISOLATED },
      cidr: settings.vpcCidr,
      createEndpoints: true,
    };
  }

  /**
   * The AWS calls functions make stay inside the VPC: secrets at cold start and after a refused
   * login (and the rotation functions'), the ingress's kick of the pump and the poller, logs.
   * No function calls Scheduler (an operator's `msgx pause` does, from outside) or STS (the
   * functions use their role's credentials from the environment; the MSK signer only signs).
   * Everything else (X-Ray, the Kafka control plane, webhooks) leaves through the NAT gateway.
   */
  private addEndpoints(cidr: string, o: { gateway: boolean }): void {
    const endpointSg = new ec2.SecurityGroup(this, 'EndpointSg', {
      vpc: this.vpc,
      description: 'msgx interface endpoints',
      allowAllOutbound: false,
    });
    endpointSg.addIngressRule(ec2.Peer.ipv4(cidr), ec2.Port.tcp(443), 'HTTPS from inside the VPC');
    const interfaces: Record<string, ec2.InterfaceVpcEndpointAwsService> = {
      SecretsManager: ec2.InterfaceVpcEndpointAwsService.SECRETS_MANAGER,
      Lambda: ec2.InterfaceVpcEndpointAwsService.LAMBDA,
      Logs: ec2.InterfaceVpcEndpointAwsService.CLOUDWATCH_LOGS,
    };
    for (const [name, service] of Object.entries(interfaces)) {
      this.vpc.addInterfaceEndpoint(name, {
        service,
        subnets: this.appSubnets,
        securityGroups: [endpointSg],
        privateDnsEnabled: true,
        open: false,
      });
    }
    // A gateway endpoint needs the route tables, which an imported VPC does not expose.
    if (o.gateway) this.vpc.addGatewayEndpoint('S3', { service: ec2.GatewayVpcEndpointAwsService.S3 });
  }

  /**
   * An environment-agnostic stack gets two AZs from CDK; 3-AZ stages (MSK across three zones)
   * take the first `azs` of Fn::GetAZs, which works in any region without a lookup.
   */
  override get availabilityZones(): string[] {
    const n = this.azCount ?? 2;
    return Array.from({ length: n }, (_, i) => Fn.select(i, Fn.getAzs()));
  }
}
