/**
 * Ruby's `strftime` for a moment in a fixed UTC offset (the subset Ruby's Time and DateTime
 * share): conversions `%Y %C %y %G %g %m %B %b %h %d %e %j %H %k %I %l %M %S %L %N %p %P %A %a
 * %u %w %U %W %V %z %Z %s %F %D %T %R %r %c %x %X %v %n %t %%`, flags `-` (no padding),
 * `_` (spaces), `0` (zeros), `^` (upper case), `#` (swap case), a width, and `:`/`::` for `%z`.
 */

/** A moment and the UTC offset it is written in. */
export interface ZonedTime {
  /** Milliseconds since the epoch. */
  epochMs: number;
  /** Minutes east of UTC. */
  offsetMinutes: number;
}

const MONTHS = [
  'January',
  'February',
  'March',
  'April',
  'May',
  'June',
  'July',
  'August',
  'September',
  'October',
  'November',
  'December',
];
const DAYS = ['Sunday', 'Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday'];

const DIRECTIVE = /%([-_0^#]*)(\d*)(:{0,2})([a-zA-Z%+])/g;

function pad(value: number, width: number, padChar: string): string {
  const negative = value < 0;
  const digits = String(Math.abs(value));
  const body = digits.padStart(width - (negative ? 1 : 0), padChar);
  return negative ? `-${body}` : body;
}

/** ISO 8601 week-based year and week number of a calendar date. */
function isoWeek(year: number, month: number, day: number): { year: number; week: number } {
  const date = new Date(Date.UTC(year, month, day));
  const weekday = date.getUTCDay() || 7;
  date.setUTCDate(date.getUTCDate() + 4 - weekday);
  const weekYear = date.getUTCFullYear();
  const firstDay = Date.UTC(weekYear, 0, 1);
  return { year: weekYear, week: Math.ceil(((date.getTime() - firstDay) / 86_400_000 + 1) / 7) };
}

function formatOffset(offsetMinutes: number, colons: number): string {
  const sign = offsetMinutes < 0 ? '-' : '+';
  const abs = Math.abs(offsetMinutes);
  const hh = String(Math.floor(abs / 60)).padStart(2, '0');
  const mm = String(abs % 60).padStart(2, '0');
  if (colons === 1) return `${sign}${hh}:${mm}`;
  if (colons === 2) return `${sign}${hh}:${mm}:00`;
  return `${sign}${hh}${mm}`;
}

/** Formats `time` with a Ruby strftime pattern; unknown directives are kept as written, as Ruby does. */
export function strftime(time: ZonedTime, format: string): string {
  // Shift by the offset, then read the UTC fields: the wall clock in that offset.
  const wall = new Date(time.epochMs + time.offsetMinutes * 60_000);
  const year = wall.getUTCFullYear();
  const month = wall.getUTCMonth();
  const day = wall.getUTCDate();
  const hour = wall.getUTCHours();
  const minute = wall.getUTCMinutes();
  const second = wall.getUTCSeconds();
  const ms = wall.getUTCMilliseconds();
  const weekday = wall.getUTCDay();
  const yearDay = Math.floor((Date.UTC(year, month, day) - Date.UTC(year, 0, 1)) / 86_400_000) + 1;
  const hour12 = hour % 12 === 0 ? 12 : hour % 12;

  return format.replace(DIRECTIVE, (whole, flags: string, widthText: string, colons: string, conv: string) => {
    const width = widthText === '' ? undefined : Number(widthText);
    const number = (value: number, defaultWidth: number, defaultPad: '0' | ' ' = '0') => {
      if (flags.includes('-')) return String(value);
      const padChar = flags.includes('_') ? ' ' : flags.includes('0') ? '0' : defaultPad;
      return pad(value, width ?? defaultWidth, padChar);
    };
    const text = (value: string, swapToLower = false) => {
      let out = value;
      if (flags.includes('^')) out = out.toUpperCase();
      if (flags.includes('#')) out = swapToLower ? out.toLowerCase() : out.toUpperCase();
      if (width !== undefined && !flags.includes('-')) out = out.padStart(width, flags.includes('0') ? '0' : ' ');
      return out;
    };
    const compose = (pattern: string) => text(strftime(time, pattern));
    if (colons !== '' && conv !== 'z') return whole;
    switch (conv) {
      case 'Y':
        return number(year, 1);
      case 'C':
        return number(Math.floor(year / 100), 2);
      case 'y':
        return number(((year % 100) + 100) % 100, 2);
      case 'G':
        return number(isoWeek(year, month, day).year, 1);
      case 'g':
        return number(isoWeek(year, month, day).year % 100, 2);
      case 'm':
        return number(month + 1, 2);
      case 'B':
        return text(MONTHS[month] as string);
      case 'b':
      case 'h':
        return text((MONTHS[month] as string).slice(0, 3));
      case 'd':
        return number(day, 2);
      case 'e':
        return number(day, 2, ' ');
      case 'j':
        return number(yearDay, 3);
      case 'H':
        return number(hour, 2);
      case 'k':
        return number(hour, 2, ' ');
      case 'I':
        return number(hour12, 2);
      case 'l':
        return number(hour12, 2, ' ');
      case 'M':
        return number(minute, 2);
      case 'S':
        return number(second, 2);
      case 'L':
        return String(ms)
          .padStart(3, '0')
          .padEnd(width ?? 3, '0')
          .slice(0, width ?? 3);
      case 'N':
        return String(ms)
          .padStart(3, '0')
          .padEnd(width ?? 9, '0')
          .slice(0, width ?? 9);
      case 'p':
        return text(hour < 12 ? 'AM' : 'PM', true);
      case 'P':
        return text(hour < 12 ? 'am' : 'pm');
      case 'A':
        return text(DAYS[weekday] as string);
      case 'a':
        return text((DAYS[weekday] as string).slice(0, 3));
      case 'u':
        return number(weekday === 0 ? 7 : weekday, 1);
      case 'w':
        return number(weekday, 1);
      case 'U':
        return number(Math.floor((yearDay - 1 + 7 - weekday) / 7), 2);
      case 'W':
        return number(Math.floor((yearDay - 1 + 7 - ((weekday + 6) % 7)) / 7), 2);
      case 'V':
        return number(isoWeek(year, month, day).week, 2);
      case 'z':
        return formatOffset(time.offsetMinutes, colons.length);
      case 'Z':
        return text(formatOffset(time.offsetMinutes, 1));
      case 's':
        return number(Math.floor(time.epochMs / 1000), 1);
      case 'F':
        return compose('%Y-%m-%d');
      case 'D':
      case 'x':
        return compose('%m/%d/%y');
      case 'T':
      case 'X':
        return compose('%H:%M:%S');
      case 'R':
        return compose('%H:%M');
      case 'r':
        return compose('%I:%M:%S %p');
      case 'c':
        return compose('%a %b %e %H:%M:%S %Y');
      case 'v':
        return compose('%e-%^b-%Y');
      case '+':
        return compose('%a %b %e %H:%M:%S %Z %Y');
      case 'n':
        return '\n';
      case 't':
        return '\t';
      case '%':
        return '%';
      default:
        return whole;
    }
  });
}
