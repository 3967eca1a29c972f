import { bool, ConfigError, int, list, loadConfig, oneOf, str } from './env';

describe('loadConfig', () => {
  const spec = { NAME: str(), PORT: int(8080, 1, 65535), ON: bool(false), MODE: oneOf(['a', 'b'] as const, 'a'), HOSTS: list(['h:1']) };

  it('reads values and defaults once, frozen', () => {
    const config = loadConfig(spec, { NAME: 'x', PORT: '9000', ON: 'yes', HOSTS: 'a:1, b:2' });
    expect(config).toEqual({ NAME: 'x', PORT: 9000, ON: true, MODE: 'a', HOSTS: ['a:1', 'b:2'] });
    expect(Object.isFrozen(config)).toBe(true);
  });

  it('reports every problem at once', () => {
    try {
      loadConfig(spec, { PORT: '99999', ON: 'maybe', MODE: 'c' });
      throw new Error('expected a ConfigError');
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError);
      expect((err as ConfigError).problems).toEqual([
        'NAME is required',
        'PORT must be between 1 and 65535, got 99999',
        "ON must be true or false, got 'maybe'",
        "MODE must be one of a, b, got 'c'",
      ]);
    }
  });
});
