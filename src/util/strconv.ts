/** Go's int32 range: what strconv.ParseInt(s, 10, 32) accepts, and so an int32 flag or a klog level. */
export const INT32_MIN = -(2 ** 31);
export const INT32_MAX = 2 ** 31 - 1;

/**
 * Go's strconv.ParseBool, which flags (pflag) and upstream's label checks use: exactly
 * 1 t T true TRUE True and 0 f F false FALSE False; anything else (even "") is no boolean.
 */
export function parseGoBool(text: string): boolean | undefined {
  switch (text) {
    case '1': case 't': case 'T': case 'true': case 'TRUE': case 'True':
      return true;
    case '0': case 'f': case 'F': case 'false': case 'FALSE': case 'False':
      return false;
    default:
      return undefined;
  }
}
