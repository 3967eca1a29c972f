import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { bool, ConfigError, int, list, loadConfig, oneOf, readableFile, secret, str } from './env';

describe('loadConfig', () => {
  const spec = { NAME: str(), PORT: int(8080, 1, 65535), ON: bool(false), MODE: oneOf(['a', 'b'] as const, 'a'), HOSTS: list(['h:1']) };

  it('reads values and defaults once, frozen', () => {
    const config = loadConfig(spec, { NAME: 'x', PORT: '9000', ON: 'yes', HOSTS: 'a:1, b:2' });
    expect(config).toEqual({ NAME: 'x', PORT: 9000, ON: true, MODE: 'a', HOSTS: ['a:1', 'b:2'] });
    expect(Object.isFrozen(config)).toBe(true);
  });

  it('reports every problem at once', () => {
    let err: unknown;
    try {
      loadConfig(spec, { PORT: '99999', ON: 'maybe', MODE: 'c' });
    } catch (thrown) {
      err = thrown;
    }
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as ConfigError).problems).toEqual([
      'NAME is required',
      'PORT must be between 1 and 65535, got 99999',
      "ON must be true or false, got 'maybe'",
      "MODE must be one of a, b, got 'c'",
    ]);
  });
});

describe('secrets and files', () => {
  const dir = mkdtempSync(join(tmpdir(), 'agentrun-config-'));
  const file = join(dir, 'password');
  writeFileSync(file, 's3cret\n');
  const spec = { PASSWORD: secret(), CA: readableFile() };

  it('reads a secret from the variable or from the file its _FILE names, without the trailing newline', () => {
    expect(loadConfig(spec, { PASSWORD: 'direct' }).PASSWORD).toBe('direct');
    expect(loadConfig(spec, { PASSWORD_FILE: file }).PASSWORD).toBe('s3cret');
    expect(loadConfig(spec, {}).PASSWORD).toBeUndefined();
  });

  it('refuses both forms at once, an unreadable secret file and a missing certificate, naming the setting', () => {
    expect(() => loadConfig(spec, { PASSWORD: 'a', PASSWORD_FILE: file })).toThrow('PASSWORD and PASSWORD_FILE are both set; set one');
    expect(() => loadConfig(spec, { PASSWORD_FILE: join(dir, 'absent') })).toThrow(/PASSWORD_FILE: cannot read .*absent: ENOENT/);
    expect(() => loadConfig(spec, { CA: join(dir, 'ca.pem') })).toThrow(/CA: cannot read .*ca\.pem: ENOENT/);
    expect(loadConfig(spec, { CA: file }).CA).toBe(file);
  });
});
