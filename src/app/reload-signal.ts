import { configReloader } from '../cloud/config-reload.ts';
import type { Logger } from '../log.ts';
import { errorMessage } from '../util/errors.ts';

/**
 * SIGHUP, which `systemctl reload edge-ccm` sends (ExecReload= in deploy/systemd/edge-ccm.service):
 * the provider reads its configuration file again now and the outcome is logged (a rejected text
 * is also logged, counted and recorded as any reload). Handled for the whole run: the signal's
 * default action would end the process. Returns the function that removes the handler.
 */
export function reloadOnHangup(provider: object, logger: Logger): () => void {
  const reloader = configReloader(provider);
  const onHangup = () => {
    logger.info('SIGHUP: reading the cloud config again');
    if (!reloader) {
      logger.info('SIGHUP: this provider has no configuration file to read again');
      return;
    }
    reloader.reloadConfig().then(
      (outcome) => logger.info(`SIGHUP: cloud config ${outcome}`),
      (e) => logger.error('SIGHUP: cannot read the cloud config again', { error: errorMessage(e) }),
    );
  };
  process.on('SIGHUP', onHangup);
  return () => process.off('SIGHUP', onHangup);
}
