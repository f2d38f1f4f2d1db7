import { RequestError } from '../shared/errors.ts';

/** 400: one field of a request is not acceptable; `field` is its path in the body (`headers.x`, `ids[3]`) or a parameter's name. */
export class InvalidFieldError extends RequestError {
  constructor(
    readonly field: string,
    reason: string,
  ) {
    super(400, 'invalid_request', `${field}: ${reason}`, { field });
    this.name = 'InvalidFieldError';
  }
}
