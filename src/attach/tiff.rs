//! The little of TIFF that OCR needs in our own hands: the size of every page of a file
//! (so that no page is decoded before its size is checked), and a TIFF around the CCITT
//! fax data of a scanned PDF page (the decoders read CCITT only inside TIFF).

/// Pages of a TIFF looked at, at most (a loop of IFDs ends here too).
const MAX_PAGES: usize = 10_000;

const WIDTH: u16 = 256;
const LENGTH: u16 = 257;

fn u16_at(b: &[u8], at: usize, le: bool) -> Option<u16> {
    let s: [u8; 2] = b.get(at..at + 2)?.try_into().ok()?;
    Some(if le {
        u16::from_le_bytes(s)
    } else {
        u16::from_be_bytes(s)
    })
}

fn u32_at(b: &[u8], at: usize, le: bool) -> Option<u32> {
    let s: [u8; 4] = b.get(at..at + 4)?.try_into().ok()?;
    Some(if le {
        u32::from_le_bytes(s)
    } else {
        u32::from_be_bytes(s)
    })
}

/// The width and height of each page of a (classic, not Big) TIFF, read from its image
/// file directories without decoding anything; or what is wrong with them, in words that
/// complete "its …" ("TIFF directories run past the end of the file").
pub fn pages(b: &[u8]) -> Result<Vec<(u32, u32)>, String> {
    let cut =
        || "TIFF directories run past the end of the file (it is cut short or damaged)".to_owned();
    let le = match b.get(..4) {
        Some(b"II*\0") => true,
        Some(b"MM\0*") => false,
        _ => return Err("TIFF header does not read (it is not a classic TIFF)".into()),
    };
    let mut out = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut ifd = u32_at(b, 4, le).ok_or_else(cut)? as usize;
    while ifd != 0 {
        if out.len() >= MAX_PAGES {
            return Err(format!(
                "TIFF has more than {MAX_PAGES} pages, more than OCR reads in one file; split it (e.g. `tiffsplit`) and attach the parts"
            ));
        }
        if !seen.insert(ifd) {
            return Err(format!(
                "TIFF directories loop: the one after page {} is an earlier one",
                out.len()
            ));
        }
        let n = u16_at(b, ifd, le).ok_or_else(cut)? as usize;
        let (mut w, mut h) = (None, None);
        for i in 0..n {
            let e = ifd + 2 + 12 * i;
            let tag = u16_at(b, e, le).ok_or_else(cut)?;
            let kind = u16_at(b, e + 2, le).ok_or_else(cut)?;
            let value = match kind {
                3 => u32::from(u16_at(b, e + 8, le).ok_or_else(cut)?),
                4 => u32_at(b, e + 8, le).ok_or_else(cut)?,
                _ => continue,
            };
            match tag {
                WIDTH => w = Some(value),
                LENGTH => h = Some(value),
                _ => {}
            }
        }
        match (w, h) {
            (Some(w), Some(h)) => out.push((w, h)),
            _ => {
                return Err(format!(
                    "TIFF page {} has no width or height",
                    out.len() + 1
                ))
            }
        }
        ifd = u32_at(b, ifd + 2 + 12 * n, le).ok_or_else(cut)? as usize;
    }
    if out.is_empty() {
        return Err("TIFF has no page".into());
    }
    Ok(out)
}

/// How a PDF's CCITTFaxDecode stream is coded (its `DecodeParms`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ccitt {
    pub width: u32,
    pub height: u32,
    /// `K`: negative for group 4, 0 for group 3 one-dimensional, positive for group 3
    /// two-dimensional.
    pub k: i64,
    /// `BlackIs1`: 1 bits are black.
    pub black_is_1: bool,
    /// `EncodedByteAlign`: each row starts on a byte.
    pub byte_align: bool,
}

/// A little-endian TIFF of one page whose only strip is `data`, coded as `c` says.
pub fn wrap_ccitt(data: &[u8], c: &Ccitt) -> Vec<u8> {
    const SHORT: u16 = 3;
    const LONG: u16 = 4;
    let (compression, options) = match c.k {
        k if k < 0 => (4u32, None),
        k => (
            3u32,
            Some(u32::from(k > 0) | if c.byte_align { 4 } else { 0 }),
        ),
    };
    // Decoded CCITT data is 1 for black (as fax machines send it); BlackIs1 false asks
    // the reader to show it inverted, so that 0 is black.
    let photometric = if c.black_is_1 { 0 } else { 1 };
    let mut entries: Vec<(u16, u16, u32)> = vec![
        (WIDTH, LONG, c.width),
        (LENGTH, LONG, c.height),
        (258, SHORT, 1),
        (259, SHORT, compression),
        (262, SHORT, photometric),
        (273, LONG, 8),
        (277, SHORT, 1),
        (278, LONG, c.height),
        (279, LONG, data.len() as u32),
    ];
    match options {
        Some(t4) => entries.push((292, LONG, t4)),
        None => entries.push((293, LONG, 0)),
    }
    let pad = data.len() % 2;
    let ifd = 8 + data.len() + pad;
    let mut out = Vec::with_capacity(ifd + 2 + 12 * entries.len() + 4);
    out.extend_from_slice(b"II*\0");
    out.extend_from_slice(&(ifd as u32).to_le_bytes());
    out.extend_from_slice(data);
    out.resize(ifd, 0);
    out.extend_from_slice(&(entries.len() as u16).to_le_bytes());
    for (tag, kind, value) in entries {
        out.extend_from_slice(&tag.to_le_bytes());
        out.extend_from_slice(&kind.to_le_bytes());
        out.extend_from_slice(&1u32.to_le_bytes());
        if kind == SHORT {
            out.extend_from_slice(&(value as u16).to_le_bytes());
            out.extend_from_slice(&[0, 0]);
        } else {
            out.extend_from_slice(&value.to_le_bytes());
        }
    }
    out.extend_from_slice(&0u32.to_le_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wrapper_reads_back_as_one_page() {
        let c = Ccitt {
            width: 1700,
            height: 2200,
            k: -1,
            black_is_1: false,
            byte_align: false,
        };
        let tiff = wrap_ccitt(&[1, 2, 3], &c);
        assert_eq!(pages(&tiff), Ok(vec![(1700, 2200)]));
    }

    #[test]
    fn broken_looping_and_endless_directories_say_what_is_wrong() {
        assert!(pages(b"II*\0").expect_err("cut").contains("past the end"));
        assert!(pages(b"not a tiff at all")
            .expect_err("not")
            .contains("header"));
        // The first directory's "next" points back at itself.
        let mut looped = wrap_ccitt(
            &[0; 4],
            &Ccitt {
                width: 8,
                height: 8,
                k: -1,
                black_is_1: true,
                byte_align: false,
            },
        );
        let n = looped.len();
        let ifd = u32::from_le_bytes([looped[4], looped[5], looped[6], looped[7]]);
        looped[n - 4..].copy_from_slice(&ifd.to_le_bytes());
        assert!(pages(&looped).expect_err("loop").contains("loop"));
        // A directory that runs past the end of the file.
        let mut cut = wrap_ccitt(
            &[0; 4],
            &Ccitt {
                width: 8,
                height: 8,
                k: -1,
                black_is_1: true,
                byte_align: false,
            },
        );
        cut.truncate(cut.len() - 20);
        assert!(pages(&cut).expect_err("cut").contains("past the end"));
    }

    /// More pages than OCR reads: said as such, not as directories that do not read.
    #[test]
    fn a_tiff_past_the_page_cap_says_so() {
        let tiff = many_pages(MAX_PAGES + 1);
        let why = pages(&tiff).expect_err("too many");
        assert!(
            why.contains(&format!("more than {MAX_PAGES} pages")),
            "{why}"
        );
        assert_eq!(pages(&many_pages(3)).map(|p| p.len()), Ok(3));
    }

    /// A little-endian TIFF of `n` pages of 8 x 8 pixels (directories only, no image data).
    fn many_pages(n: usize) -> Vec<u8> {
        let mut b = b"II*\0".to_vec();
        b.extend_from_slice(&8u32.to_le_bytes());
        for i in 0..n {
            let at = b.len();
            b.extend_from_slice(&2u16.to_le_bytes());
            for tag in [WIDTH, LENGTH] {
                b.extend_from_slice(&tag.to_le_bytes());
                b.extend_from_slice(&3u16.to_le_bytes());
                b.extend_from_slice(&1u32.to_le_bytes());
                b.extend_from_slice(&8u32.to_le_bytes());
            }
            let next = if i + 1 == n {
                0
            } else {
                (at + 2 + 24 + 4) as u32
            };
            b.extend_from_slice(&next.to_le_bytes());
        }
        b
    }
}
