/**
 * The test kit's own error.
 *
 * @module
 */

/**
 * The fake host could not do what the test asked, or the plugin under test broke the protocol
 * or left something behind. The message says what happened and what to do. Errors of the
 * plugin's own code and of the SDK (a `ConfigurationError`, a `NotGrantedError` inside a
 * handler) reach the test unchanged, not wrapped in this.
 */
export class TestKitError extends Error {
  override name = "TestKitError";
}
