// The page's run announcer (web/page/run_announcer.js): what its live region says while a run streams, on a clock
// the test moves: a finished sentence at a reader's pace, never a token, and the run's end.
import { RunAnnouncer } from '../../web/page/run_announcer.js';

// -> { announcer, said: each text the region was given, in order, clock: { ms } } over a stand-in region
function announcerOnClock() {
  const said = [];
  let text = '';
  const region = {
    get textContent() {
      return text;
    },
    set textContent(value) {
      text = value;
      said.push(value);
    },
  };
  const clock = { ms: 0 };
  const announcer = new RunAnnouncer(region, () => clock.ms);
  announcer.start();
  return { announcer, said, clock };
}

test('tokens without a finished sentence say nothing; the end says how many tokens and why the run ended', () => {
  const { announcer, said } = announcerOnClock();
  for (const token of [' my', ' lord', ',', '\n', 'And', ' I', "'ll", ' be', ' so', ',']) announcer.add(token);
  expect(said).toEqual([]);
  announcer.end(10, 'token limit');
  expect(said).toEqual(['Generated 10 tokens: token limit.']);
  announcer.end(1, 'stopped');
  expect(said.at(-1)).toBe('Generated 1 token: stopped.');
});

test('a finished sentence is said at once, with its white space as one space; the next waits until it can have been read, and then the latest is said', () => {
  const { announcer, said, clock } = announcerOnClock();
  for (const token of [',', ' thy', ' father', ',\n', 'To', ' tell', ' him', '.', '\n\n', 'RICH']) announcer.add(token);
  expect(said).toEqual([', thy father, To tell him.']);
  clock.ms = 2399;  // six words at 2.5 a second: 2.4 s
  announcer.add('ARD:\nI would.\nNo more.\n');
  expect(said).toHaveLength(1);  // too soon: skipped, the output has it
  clock.ms = 2400;
  announcer.add('Thou art a man! ');
  expect(said).toEqual([', thy father, To tell him.', 'Thou art a man!']);
  clock.ms = 4399;  // four words: no sooner than two seconds
  announcer.add('So.\n');
  expect(said).toHaveLength(2);
});

test('a blank line ends a sentence too; a long sentence holds the next one for as long as it takes to read (150 words a minute)', () => {
  const { announcer, said, clock } = announcerOnClock();
  const long = Array.from({ length: 20 }, () => 'word').join(' ');
  announcer.add(`${long}\n\n`);
  expect(said).toEqual([long]);
  clock.ms = 7999;  // 20 words at 2.5 a second: 8 s
  announcer.add('Too soon. ');
  expect(said).toHaveLength(1);
  clock.ms = 8000;
  announcer.add('In time. ');
  expect(said.at(-1)).toBe('In time.');
});

test('start() empties the region once and forgets the last run: its unfinished text and its pace', () => {
  const { announcer, said, clock } = announcerOnClock();
  announcer.add('One. And an unfinished');
  announcer.start();
  expect(said).toEqual(['One.', '']);
  announcer.start();  // already empty: no change
  expect(said).toHaveLength(2);
  clock.ms = 10;
  announcer.add(' sentence. ');
  expect(said.at(-1)).toBe('sentence.');
});
