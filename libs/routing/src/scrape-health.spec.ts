import { describe, expect, it } from 'vitest';
import { scrapeHealth } from './scrape-health';

describe('scrapeHealth', () => {
  it.each([
    [0, 3, 'ok'],
    [1, 3, 'suspect'],
    [2, 3, 'suspect'],
    [3, 3, 'unavailable'],
    [7, 3, 'unavailable'],
    [1, 1, 'unavailable'],
  ] as const)('%i unanswered scrapes in a row with a threshold of %i → %s', (failures, unavailableAfter, expected) => {
    expect(scrapeHealth(failures, { unavailableAfter })).toBe(expected);
  });
});
