import type { Template } from './synth.ts';

/** What a deployed resource answers to `Ref` and `Fn::GetAtt`. */
export interface Physical {
  ref: string;
  attrs?: Record<string, string>;
}

export interface Pseudo {
  region: string;
  account: string;
}

/**
 * CloudFormation's intrinsic functions, evaluated against what the emulator has deployed: `Ref`
 * (resources and pseudo parameters), `Fn::GetAtt`, `Fn::Join`, `Fn::Sub`, `Fn::ImportValue`,
 * `Fn::FindInMap`, `Fn::Select`. Anything else — another intrinsic, a resource not deployed
 * yet, an attribute the emulator does not provide, an export nobody made — fails with the path
 * of the value, so a template the emulator does not understand never runs half-resolved.
 */
export class Resolver {
  readonly resources = new Map<string, Physical>();
  /** Exports by name, resolved when imported (an export nobody imports is never evaluated). */
  readonly exports = new Map<string, () => unknown>();

  constructor(readonly pseudo: Pseudo) {}

  put(stack: string, logicalId: string, p: Physical): void {
    this.resources.set(`${stack}/${logicalId}`, p);
  }

  get(stack: string, logicalId: string, at: string): Physical {
    const p = this.resources.get(`${stack}/${logicalId}`);
    if (!p) throw new Error(`${at}: ${stack}/${logicalId} is not deployed (yet)`);
    return p;
  }

  /** Resolves `v` from stack `stack` to plain JSON. `at` names the value in errors. */
  resolve(stack: string, t: Template, v: unknown, at: string): unknown {
    if (v === null || typeof v !== 'object') return v;
    if (Array.isArray(v)) return v.map((x, i) => this.resolve(stack, t, x, `${at}[${i}]`));
    const keys = Object.keys(v);
    const fn = keys.find((k) => k === 'Ref' || k.startsWith('Fn::'));
    if (!fn) return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, this.resolve(stack, t, x, `${at}.${k}`)]));
    if (keys.length !== 1) throw new Error(`${at}: intrinsic ${fn} with other keys (${keys.join(', ')})`);
    const arg = (v as Record<string, unknown>)[fn];
    const r = (x: unknown, sub: string) => this.resolve(stack, t, x, `${at}.${fn}${sub}`);
    switch (fn) {
      case 'Ref':
        return this.ref(stack, String(arg), at);
      case 'Fn::GetAtt': {
        const [id, attr] = Array.isArray(arg) ? (arg as string[]) : String(arg).split(/\.(.+)/);
        const p = this.get(stack, id!, at);
        const value = p.attrs?.[attr!];
        if (value === undefined) throw new Error(`${at}: ${stack}/${id} has no attribute ${attr} in the emulator`);
        return value;
      }
      case 'Fn::Join': {
        const [sep, parts] = arg as [string, unknown[]];
        const list = r(parts, '[1]');
        if (!Array.isArray(list)) throw new Error(`${at}: Fn::Join of a non-list`);
        return list.map(String).join(sep);
      }
      case 'Fn::Sub': {
        const [text, vars] = Array.isArray(arg) ? (arg as [string, Record<string, unknown>]) : [String(arg), {}];
        const given = r(vars, '[1]') as Record<string, unknown>;
        return text.replace(/\$\{([^}!][^}]*)\}/g, (_, name: string) => {
          if (name in given) return String(given[name]);
          if (name.includes('.')) {
            const [id, attr] = name.split(/\.(.+)/);
            return String(this.resolve(stack, t, { 'Fn::GetAtt': [id, attr] }, `${at}.Fn::Sub(${name})`));
          }
          return String(this.ref(stack, name, `${at}.Fn::Sub(${name})`));
        });
      }
      case 'Fn::ImportValue': {
        const name = String(r(arg, ''));
        const value = this.exports.get(name);
        if (value === undefined) throw new Error(`${at}: no stack exports ${name}`);
        return value();
      }
      case 'Fn::FindInMap': {
        const [map, k1, k2] = r(arg, '') as string[];
        const value = t.Mappings?.[map!]?.[k1!]?.[k2!];
        if (value === undefined) throw new Error(`${at}: mapping ${map}/${k1}/${k2} not in the template`);
        return value;
      }
      case 'Fn::Select': {
        const [i, list] = r(arg, '') as [number, unknown[]];
        if (!Array.isArray(list) || list[Number(i)] === undefined) throw new Error(`${at}: Fn::Select ${i} out of range`);
        return list[Number(i)];
      }
      default:
        throw new Error(`${at}: intrinsic ${fn} is not known to the emulator`);
    }
  }

  private ref(stack: string, name: string, at: string): string {
    const { region, account } = this.pseudo;
    const pseudo: Record<string, string> = {
      'AWS::Region': region,
      'AWS::AccountId': account,
      'AWS::Partition': 'aws',
      'AWS::URLSuffix': 'amazonaws.com',
      'AWS::StackName': stack,
    };
    if (name in pseudo) return pseudo[name]!;
    if (name.startsWith('AWS::')) throw new Error(`${at}: pseudo parameter ${name} is not known to the emulator`);
    return this.get(stack, name, at).ref;
  }
}
