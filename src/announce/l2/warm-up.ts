/**
 * The warm-up of a process on the liveness mesh (the L2 speaker, the control-plane VIP): for one
 * liveness timeout after its start, or after a pause, it has not yet heard the peers that are up
 * and would elect itself for what they hold; so it holds nothing and says "warming" until `over`.
 */
export class WarmUp {
  over = false;
  private timer?: ReturnType<typeof setTimeout>;

  /** `done` runs once the warm-up is over (the caller logs and reconciles). */
  constructor(private readonly ms: number, private readonly done: () => void) {}

  /** (Re)starts it: not over for `ms` from now. */
  start(): void {
    this.over = false;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.over = true;
      this.done();
    }, this.ms);
  }

  stop(): void {
    clearTimeout(this.timer);
  }
}
