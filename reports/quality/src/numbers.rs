//! Digits to English words, for comparing transcripts with references that
//! spell numbers out. Hand-written: the rules below are specific to how
//! Whisper prints spoken numbers ("3.30", "42", "21st", "15%"), which no
//! general number-to-words crate decides for us.

const ONES: [&str; 20] = [
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
];
const TENS: [&str; 10] = [
    "", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety",
];
const SCALES: [(u64, &str); 6] = [
    (1_000_000_000_000_000_000, "quintillion"),
    (1_000_000_000_000_000, "quadrillion"),
    (1_000_000_000_000, "trillion"),
    (1_000_000_000, "billion"),
    (1_000_000, "million"),
    (1_000, "thousand"),
];
/// Longer digit runs are read digit by digit (they fit no `u64` reading).
const MAX_CARDINAL_DIGITS: usize = 18;

/// Replaces every number in `text` (lowercase) by its words, with a space on
/// either side; everything else is copied unchanged. See the module
/// documentation of `quality` for the rules.
pub(super) fn spell_numbers(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len() + 16);
    let mut i = 0;
    while i < chars.len() {
        if chars[i].is_ascii_digit() {
            let (number, end) = scan(&chars, i);
            out.push(' ');
            out.push_str(&number.words().join(" "));
            out.push(' ');
            i = end;
        } else {
            out.push(chars[i]);
            i += 1;
        }
    }
    out
}

/// One number as written.
#[derive(Debug, PartialEq)]
struct Number {
    /// Integer digits, thousands separators removed.
    integer: String,
    form: Form,
    percent: bool,
}

#[derive(Debug, PartialEq)]
enum Form {
    Cardinal,
    Ordinal,
    Decimal(String),
    /// Hour and two minute digits.
    Time(u64, String),
}

fn digit_at(chars: &[char], i: usize) -> bool {
    chars.get(i).is_some_and(|c| c.is_ascii_digit())
}

fn count_digits(chars: &[char], from: usize) -> usize {
    chars[from..]
        .iter()
        .take_while(|c| c.is_ascii_digit())
        .count()
}

/// Reads the number starting at `start` (a digit); returns it and the index
/// after it.
fn scan(chars: &[char], start: usize) -> (Number, usize) {
    let mut end = start + count_digits(chars, start);
    let mut integer: String = chars[start..end].iter().collect();
    // "1,000,000": a comma followed by exactly three digits groups thousands.
    let mut grouped = false;
    while chars.get(end) == Some(&',') && count_digits(chars, end + 1) == 3 {
        integer.extend(&chars[end + 1..end + 4]);
        end += 4;
        grouped = true;
    }

    let mut form = Form::Cardinal;
    if !grouped && chars.get(end) == Some(&':') && count_digits(chars, end + 1) == 2 {
        let minutes: String = chars[end + 1..end + 3].iter().collect();
        if let Some(hour) = clock_hour(&integer, &minutes, 23) {
            form = Form::Time(hour, minutes);
            end += 3;
        }
    } else if chars.get(end) == Some(&'.') && digit_at(chars, end + 1) {
        let fraction_len = count_digits(chars, end + 1);
        let fraction: String = chars[end + 1..end + 1 + fraction_len].iter().collect();
        end += 1 + fraction_len;
        form = Form::Decimal(fraction);
    } else if let Some(suffix) = chars.get(end..end + 2) {
        let suffix: String = suffix.iter().collect();
        let word_ends = !chars.get(end + 2).is_some_and(|c| c.is_alphanumeric());
        if matches!(suffix.as_str(), "st" | "nd" | "rd" | "th") && word_ends {
            form = Form::Ordinal;
            end += 2;
        }
    }

    let percent = chars.get(end) == Some(&'%');
    if percent {
        end += 1;
    }
    // "3.30" is how Whisper prints a spoken "three thirty": a two-digit
    // fraction after an hour of 1–12 reads as a clock time, unless it is a
    // percentage.
    if let Form::Decimal(fraction) = &form
        && !grouped
        && !percent
        && fraction.len() == 2
        && let Some(hour) = clock_hour(&integer, fraction, 12).filter(|&h| h >= 1)
    {
        form = Form::Time(hour, fraction.clone());
    }
    (
        Number {
            integer,
            form,
            percent,
        },
        end,
    )
}

/// The hour when `hour` ≤ `max_hour` and `minutes` < 60.
fn clock_hour(hour: &str, minutes: &str, max_hour: u64) -> Option<u64> {
    let h: u64 = hour.parse().ok()?;
    let m: u64 = minutes.parse().ok()?;
    (hour.len() <= 2 && h <= max_hour && m < 60).then_some(h)
}

impl Number {
    fn words(&self) -> Vec<&'static str> {
        let mut out = Vec::new();
        match &self.form {
            Form::Cardinal => integer_words(&self.integer, &mut out),
            Form::Ordinal => {
                integer_words(&self.integer, &mut out);
                if let Some(last) = out.last_mut() {
                    *last = ordinal_of(last);
                }
            }
            Form::Decimal(fraction) => {
                integer_words(&self.integer, &mut out);
                out.push("point");
                digit_words(fraction, &mut out);
            }
            Form::Time(hour, minutes) => {
                cardinal(*hour, &mut out);
                match minutes.as_bytes() {
                    b"00" => out.push("o'clock"),
                    [b'0', d] => {
                        out.push("oh");
                        out.push(ONES[usize::from(d - b'0')]);
                    }
                    _ => digit_string_cardinal(minutes, &mut out),
                }
            }
        }
        if self.percent {
            out.push("percent");
        }
        out
    }
}

/// An integer as written: "007" and runs too long for a cardinal reading are
/// read digit by digit, anything else as a cardinal.
fn integer_words(digits: &str, out: &mut Vec<&'static str>) {
    if (digits.len() > 1 && digits.starts_with('0')) || digits.len() > MAX_CARDINAL_DIGITS {
        digit_words(digits, out);
    } else {
        digit_string_cardinal(digits, out);
    }
}

fn digit_string_cardinal(digits: &str, out: &mut Vec<&'static str>) {
    match digits.parse::<u64>() {
        Ok(n) => cardinal(n, out),
        Err(_) => digit_words(digits, out),
    }
}

fn digit_words(digits: &str, out: &mut Vec<&'static str>) {
    for d in digits.bytes().filter(u8::is_ascii_digit) {
        out.push(ONES[usize::from(d - b'0')]);
    }
}

/// American cardinal without "and": 105 → "one hundred five".
pub(super) fn cardinal(n: u64, out: &mut Vec<&'static str>) {
    if n == 0 {
        out.push("zero");
        return;
    }
    let mut rest = n;
    for (scale, name) in SCALES {
        if rest >= scale {
            below_thousand(rest / scale, out);
            out.push(name);
            rest %= scale;
        }
    }
    if rest > 0 {
        below_thousand(rest, out);
    }
}

fn below_thousand(n: u64, out: &mut Vec<&'static str>) {
    let (hundreds, rest) = (n / 100, n % 100);
    if hundreds > 0 {
        out.push(ONES[hundreds as usize]);
        out.push("hundred");
    }
    if rest >= 20 {
        out.push(TENS[(rest / 10) as usize]);
        if rest % 10 > 0 {
            out.push(ONES[(rest % 10) as usize]);
        }
    } else if rest > 0 {
        out.push(ONES[rest as usize]);
    }
}

/// The ordinal of a cardinal's last word: "two" → "second", "forty" → "fortieth".
fn ordinal_of(word: &'static str) -> &'static str {
    match word {
        "zero" => "zeroth",
        "one" => "first",
        "two" => "second",
        "three" => "third",
        "four" => "fourth",
        "five" => "fifth",
        "six" => "sixth",
        "seven" => "seventh",
        "eight" => "eighth",
        "nine" => "ninth",
        "ten" => "tenth",
        "eleven" => "eleventh",
        "twelve" => "twelfth",
        "thirteen" => "thirteenth",
        "fourteen" => "fourteenth",
        "fifteen" => "fifteenth",
        "sixteen" => "sixteenth",
        "seventeen" => "seventeenth",
        "eighteen" => "eighteenth",
        "nineteen" => "nineteenth",
        "twenty" => "twentieth",
        "thirty" => "thirtieth",
        "forty" => "fortieth",
        "fifty" => "fiftieth",
        "sixty" => "sixtieth",
        "seventy" => "seventieth",
        "eighty" => "eightieth",
        "ninety" => "ninetieth",
        "hundred" => "hundredth",
        "thousand" => "thousandth",
        "million" => "millionth",
        "billion" => "billionth",
        "trillion" => "trillionth",
        "quadrillion" => "quadrillionth",
        "quintillion" => "quintillionth",
        // Every word `cardinal` can end with is listed above.
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each (written, spoken) pair: `written` spells out as `spoken`.
    fn check(pairs: &[(&str, &str)]) {
        for (written, spoken) in pairs {
            let spelled = spell_numbers(written)
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ");
            assert_eq!(&spelled, spoken, "{written}");
        }
    }

    #[test]
    fn cardinals() {
        let words = |n| {
            let mut out = Vec::new();
            cardinal(n, &mut out);
            out.join(" ")
        };
        assert_eq!(words(0), "zero");
        assert_eq!(words(7), "seven");
        assert_eq!(words(13), "thirteen");
        assert_eq!(words(42), "forty two");
        assert_eq!(words(90), "ninety");
        assert_eq!(words(105), "one hundred five");
        assert_eq!(words(207), "two hundred seven");
        assert_eq!(words(1999), "one thousand nine hundred ninety nine");
        assert_eq!(words(1_000_000), "one million");
        assert_eq!(words(2_000_017), "two million seventeen");
        assert_eq!(
            words(u64::MAX),
            "eighteen quintillion four hundred forty six quadrillion seven hundred forty four \
             trillion seventy three billion seven hundred nine million five hundred fifty one \
             thousand six hundred fifteen"
        );
    }

    #[test]
    fn clock_times() {
        check(&[
            ("at 3.30 and", "at three thirty and"),
            ("at 3:30", "at three thirty"),
            ("9.15", "nine fifteen"),
            ("9:05", "nine oh five"),
            ("10:00", "ten o'clock"),
            ("13:45", "thirteen forty five"),
            // A fraction that cannot be minutes, or an hour past 12, is a decimal.
            ("3.75", "three point seven five"),
            ("13.45", "thirteen point four five"),
            ("0.25", "zero point two five"),
            // Minutes ≥ 60 after a colon: two numbers.
            ("10:75", "ten : seventy five"),
        ]);
    }

    #[test]
    fn decimals_percentages_and_ordinals() {
        check(&[
            ("2.5%", "two point five percent"),
            ("2.50%", "two point five zero percent"),
            ("15%", "fifteen percent"),
            ("3.14159", "three point one four one five nine"),
            ("21st", "twenty first"),
            ("the 2nd", "the second"),
            ("3rd", "third"),
            ("12th", "twelfth"),
            ("40th", "fortieth"),
            ("100th", "one hundredth"),
            // Not an ordinal suffix: the letters stay.
            ("4three", "four three"),
            ("5stars", "five stars"),
        ]);
    }

    #[test]
    fn separators_leading_zeros_and_long_runs() {
        check(&[
            ("1,000,000", "one million"),
            ("1,50", "one , fifty"),
            ("007", "zero zero seven"),
            (
                "1234567890123456789",
                "one two three four five six seven eight nine zero one two three four five six \
                 seven eight nine",
            ),
            ("mp3", "mp three"),
            ("3pm", "three pm"),
            // A sentence-final period is not a decimal point.
            ("42.", "forty two ."),
        ]);
    }
}
