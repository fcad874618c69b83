/**
 * Node's module hooks, registered by `hide-opentelemetry-register.ts`: every `@opentelemetry/*`
 * import fails as it does when the packages are not installed.
 */

export async function resolve(
  specifier: string,
  context: unknown,
  next: (specifier: string, context: unknown) => Promise<unknown>,
): Promise<unknown> {
  if (specifier.startsWith("@opentelemetry/")) {
    const error = new Error(`Cannot find package '${specifier}'`) as NodeJS.ErrnoException;
    error.code = "ERR_MODULE_NOT_FOUND";
    throw error;
  }
  return next(specifier, context);
}
