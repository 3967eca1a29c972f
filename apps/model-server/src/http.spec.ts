import { messageText } from './http';

describe('messageText', () => {
  const image = { type: 'image_url', image_url: { url: 'x' } };

  it('reads a string, null and an array of text parts the same way in both modes', () => {
    for (const mode of ['skip', 'refuse'] as const) {
      expect(messageText('hello', mode)).toBe('hello');
      expect(messageText(null, mode)).toBe('');
      expect(messageText(undefined, mode)).toBe('');
      expect(messageText([{ type: 'text', text: 'a' }, { text: 'b' }], mode)).toBe('a\nb');
      expect(messageText(42, mode)).toBeUndefined();
      expect(messageText(['a'], mode)).toBeUndefined();
    }
  });

  it('skips a part that is not text for the scripted server and refuses it for the real one', () => {
    expect(messageText([{ type: 'text', text: 'a' }, image], 'skip')).toBe('a');
    expect(messageText([{ type: 'text', text: 'a' }, image], 'refuse')).toBeUndefined();
  });

  it('takes any part with a string text when skipping, only a text part when refusing', () => {
    expect(messageText([{ type: 'input_text', text: 'a' }], 'skip')).toBe('a');
    expect(messageText([{ type: 'input_text', text: 'a' }], 'refuse')).toBeUndefined();
  });
});
