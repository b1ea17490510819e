//! Tesseract 5 and Leptonica through their C APIs, loaded at run time (`dlopen`).
//!
//! Loading at run time keeps the build free of them (no headers, no pkg-config, no link
//! step: the `ocr` feature costs the build nothing) and lets a binary built with the
//! feature run on a machine without them, where it says so when an image is attached.
//! Leptonica comes with Tesseract (libtesseract needs it), so its functions are found
//! through Tesseract's handle.
//!
//! Everything unsafe is in this file: the symbols and their C signatures (from Tesseract's
//! `capi.h` and Leptonica's `allheaders.h`, stable across 5.x and 1.7x-1.8x), and small
//! owners (`Api`, `Pix`) that free what the libraries allocate.

use std::ffi::{c_char, c_float, c_int, c_void, CStr, CString};
use std::ptr::NonNull;
use std::sync::OnceLock;

/// Where Tesseract is looked for, in order, unless `AXOCOATL_TESSERACT` names a file.
const LIBRARIES: [&str; 2] = ["libtesseract.so.5", "libtesseract.so"];
/// The variable naming the Tesseract library to load instead (a build of one's own).
pub const LIBRARY_VAR: &str = "AXOCOATL_TESSERACT";

/// `TessPageSegMode`: fully automatic page segmentation without orientation detection.
const PSM_AUTO: c_int = 3;
/// `TessPageSegMode`: orientation and script detection only.
const PSM_OSD_ONLY: c_int = 0;
/// Leptonica's `L_SEVERITY_NONE`: it prints nothing.
const L_SEVERITY_NONE: c_int = 6;

/// The cancel callback Tesseract calls while it recognizes words.
type CancelFn = unsafe extern "C" fn(*mut c_void, c_int) -> bool;

macro_rules! symbols {
    ($($name:ident: fn($($arg:ty),*) $(-> $ret:ty)?;)*) => {
        /// The functions of the two libraries this module calls.
        #[allow(non_snake_case)]
        struct Symbols {
            $($name: unsafe extern "C" fn($($arg),*) $(-> $ret)?,)*
        }

        impl Symbols {
            #[expect(unsafe_code, reason = "dlsym, and the casts of what it finds to the C signatures")]
            fn load(handle: *mut c_void) -> Result<Symbols, String> {
                Ok(Symbols {
                    $($name: {
                        let name = concat!(stringify!($name), "\0");
                        // SAFETY: `handle` is a live dlopen handle; the name is NUL-ended.
                        let p = unsafe { libc::dlsym(handle, name.as_ptr().cast()) };
                        if p.is_null() {
                            return Err(format!("it has no function {}", stringify!($name)));
                        }
                        // SAFETY: the symbol is the C function of this name, whose
                        // signature (from capi.h / allheaders.h) is the one written here.
                        unsafe {
                            std::mem::transmute::<*mut c_void, unsafe extern "C" fn($($arg),*) $(-> $ret)?>(p)
                        }
                    },)*
                })
            }
        }
    };
}

symbols! {
    TessVersion: fn() -> *const c_char;
    TessDeleteText: fn(*const c_char);
    TessDeleteIntArray: fn(*const c_int);
    TessBaseAPICreate: fn() -> *mut c_void;
    TessBaseAPIDelete: fn(*mut c_void);
    TessBaseAPIEnd: fn(*mut c_void);
    TessBaseAPISetVariable: fn(*mut c_void, *const c_char, *const c_char) -> c_int;
    TessBaseAPIInit3: fn(*mut c_void, *const c_char, *const c_char) -> c_int;
    TessBaseAPISetPageSegMode: fn(*mut c_void, c_int);
    TessBaseAPISetImage2: fn(*mut c_void, *mut c_void);
    TessBaseAPIRecognize: fn(*mut c_void, *mut c_void) -> c_int;
    TessBaseAPIGetUTF8Text: fn(*mut c_void) -> *mut c_char;
    TessBaseAPIAllWordConfidences: fn(*mut c_void) -> *mut c_int;
    TessBaseAPIClear: fn(*mut c_void);
    TessBaseAPIDetectOrientationScript: fn(*mut c_void, *mut c_int, *mut c_float, *mut *const c_char, *mut c_float) -> c_int;
    TessMonitorCreate: fn() -> *mut c_void;
    TessMonitorDelete: fn(*mut c_void);
    TessMonitorSetCancelFunc: fn(*mut c_void, CancelFn);
    TessMonitorSetCancelThis: fn(*mut c_void, *mut c_void);
    TessMonitorGetProgress: fn(*mut c_void) -> c_int;
    pixReadMem: fn(*const u8, usize) -> *mut c_void;
    pixReadMemTiff: fn(*const u8, usize, c_int) -> *mut c_void;
    pixReadHeaderMem: fn(*const u8, usize, *mut c_int, *mut c_int, *mut c_int, *mut c_int, *mut c_int, *mut c_int) -> c_int;
    pixDestroy: fn(*mut *mut c_void);
    pixGetWidth: fn(*const c_void) -> c_int;
    pixGetHeight: fn(*const c_void) -> c_int;
    pixRotateOrth: fn(*mut c_void, c_int) -> *mut c_void;
    setMsgSeverity: fn(c_int) -> c_int;
}

/// The loaded libraries: their functions and Tesseract's version.
pub struct Library {
    f: Symbols,
    pub version: String,
}

static LIBRARY: OnceLock<Result<Library, String>> = OnceLock::new();

/// The libraries, loaded on first use; why not when they cannot be.
pub fn library() -> Result<&'static Library, &'static str> {
    LIBRARY.get_or_init(load).as_ref().map_err(String::as_str)
}

#[expect(
    unsafe_code,
    reason = "dlopen, and calls of two functions without arguments"
)]
fn load() -> Result<Library, String> {
    // Tesseract's neural network runs its loops on OpenMP threads (up to 4) that spin while
    // they wait: on a machine whose cores are busy that is 7 to 15 times slower than one
    // thread (measured: a 300 dpi A4 page in 1.7 s on one thread, 12-27 s on 4 threads of
    // 2 busy cores). OpenMP reads its limit once, when it is loaded, which is below; the
    // user's own setting wins.
    if std::env::var_os("OMP_THREAD_LIMIT").is_none() {
        std::env::set_var("OMP_THREAD_LIMIT", "1");
    }
    let names: Vec<String> = match std::env::var(LIBRARY_VAR) {
        Ok(path) if !path.is_empty() => vec![path],
        _ => LIBRARIES.iter().map(|s| (*s).to_owned()).collect(),
    };
    let mut errors = Vec::new();
    let mut handle = std::ptr::null_mut();
    for name in &names {
        let Ok(c) = CString::new(name.as_str()) else {
            errors.push(format!("{name}: not a file name"));
            continue;
        };
        // SAFETY: a NUL-ended name; the handle is kept for the life of the process.
        handle = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        if !handle.is_null() {
            break;
        }
        // SAFETY: dlerror returns a thread-local message or null.
        let why = unsafe { libc::dlerror() };
        errors.push(if why.is_null() {
            format!("{name}: not found")
        } else {
            // SAFETY: a NUL-ended message that lives until the next dl* call.
            unsafe { CStr::from_ptr(why) }
                .to_string_lossy()
                .into_owned()
        });
    }
    if handle.is_null() {
        return Err(errors.join("; "));
    }
    let f = Symbols::load(handle).map_err(|e| format!("{}: {e}", names.join(" or ")))?;
    // SAFETY: no arguments; the version is a static string.
    let version = unsafe {
        (f.setMsgSeverity)(L_SEVERITY_NONE);
        CStr::from_ptr((f.TessVersion)())
            .to_string_lossy()
            .into_owned()
    };
    if !version.starts_with('5') {
        return Err(format!(
            "found Tesseract {version}; axocoatl reads with Tesseract 5"
        ));
    }
    Ok(Library { f, version })
}

/// An image decoded by Leptonica, destroyed when dropped.
pub struct Pix {
    lib: &'static Library,
    ptr: NonNull<c_void>,
}

impl Pix {
    #[expect(unsafe_code, reason = "a getter of a live Pix")]
    pub fn width(&self) -> u32 {
        // SAFETY: `ptr` is a live Pix.
        let w = unsafe { (self.lib.f.pixGetWidth)(self.ptr.as_ptr()) };
        w.max(0) as u32
    }

    #[expect(unsafe_code, reason = "a getter of a live Pix")]
    pub fn height(&self) -> u32 {
        // SAFETY: `ptr` is a live Pix.
        let h = unsafe { (self.lib.f.pixGetHeight)(self.ptr.as_ptr()) };
        h.max(0) as u32
    }

    /// The image turned clockwise by `quarters` quarter turns.
    #[expect(unsafe_code, reason = "Leptonica makes a new Pix from a live one")]
    pub fn rotated(&self, quarters: u32) -> Option<Pix> {
        // SAFETY: `ptr` is a live Pix; the result is a new Pix or null.
        let p = unsafe { (self.lib.f.pixRotateOrth)(self.ptr.as_ptr(), (quarters % 4) as c_int) };
        NonNull::new(p).map(|ptr| Pix { lib: self.lib, ptr })
    }
}

impl Drop for Pix {
    #[expect(unsafe_code, reason = "Leptonica frees a Pix it allocated")]
    fn drop(&mut self) {
        let mut p = self.ptr.as_ptr();
        // SAFETY: `p` is a Pix this owner holds a reference of; pixDestroy drops it.
        unsafe { (self.lib.f.pixDestroy)(&mut p) };
    }
}

/// Standard error pointed at /dev/null while it lives, then given back. The image
/// libraries under Leptonica (libpng, libjpeg, libtiff) print their complaints about a
/// damaged file straight to standard error, past Leptonica's own switch; the damage is
/// reported as an error of the attachment instead. The window is one header read or one
/// decode: what another thread prints meanwhile is lost.
struct Quiet {
    saved: c_int,
}

impl Quiet {
    #[expect(
        unsafe_code,
        reason = "open, fcntl and dup2 on descriptors this process owns"
    )]
    fn new() -> Option<Quiet> {
        // SAFETY: plain system calls on a NUL-ended path and small integers; every
        // descriptor opened here is closed here or by Drop.
        unsafe {
            let null = libc::open(c"/dev/null".as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
            if null < 0 {
                return None;
            }
            let saved = libc::fcntl(2, libc::F_DUPFD_CLOEXEC, 3);
            if saved < 0 || libc::dup2(null, 2) < 0 {
                libc::close(null);
                if saved >= 0 {
                    libc::close(saved);
                }
                return None;
            }
            libc::close(null);
            Some(Quiet { saved })
        }
    }
}

impl Drop for Quiet {
    #[expect(unsafe_code, reason = "dup2 and close of the descriptor saved in new")]
    fn drop(&mut self) {
        // SAFETY: `saved` is the descriptor `new` duplicated from standard error.
        unsafe {
            libc::dup2(self.saved, 2);
            libc::close(self.saved);
        }
    }
}

/// What Leptonica's header reader says of encoded image bytes, without decoding them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub width: u32,
    pub height: u32,
}

impl Library {
    /// The width and height in an image's header (PNG, JPEG, TIFF, WebP, BMP, JPEG 2000),
    /// read without decoding the pixels.
    #[expect(unsafe_code, reason = "Leptonica reads a header from a slice we own")]
    pub fn header(&self, bytes: &[u8]) -> Option<Header> {
        let (mut format, mut w, mut h, mut bps, mut spp, mut cmap) = (0, 0, 0, 0, 0, 0);
        let quiet = Quiet::new();
        // SAFETY: the pointer and length describe `bytes`; the outputs are locals.
        let r = unsafe {
            (self.f.pixReadHeaderMem)(
                bytes.as_ptr(),
                bytes.len(),
                &mut format,
                &mut w,
                &mut h,
                &mut bps,
                &mut spp,
                &mut cmap,
            )
        };
        drop(quiet);
        (r == 0 && w > 0 && h > 0).then_some(Header {
            width: w as u32,
            height: h as u32,
        })
    }

    /// Decodes an image (page `page` of a TIFF).
    #[expect(
        unsafe_code,
        reason = "Leptonica decodes a slice we own into a new Pix"
    )]
    pub fn decode(&'static self, bytes: &[u8], tiff_page: Option<u32>) -> Option<Pix> {
        let quiet = Quiet::new();
        // SAFETY: the pointer and length describe `bytes`; the result is a new Pix or null.
        let p = unsafe {
            match tiff_page {
                Some(n) => (self.f.pixReadMemTiff)(bytes.as_ptr(), bytes.len(), n as c_int),
                None => (self.f.pixReadMem)(bytes.as_ptr(), bytes.len()),
            }
        };
        drop(quiet);
        NonNull::new(p).map(|ptr| Pix { lib: self, ptr })
    }
}

/// How one recognition ended.
pub enum Recognized {
    Done {
        text: String,
        /// Each recognized word's confidence, 0 to 100.
        confidences: Vec<u8>,
    },
    /// `stop` said so; Tesseract had done `progress` percent.
    Cancelled {
        progress: u8,
    },
    Failed,
}

/// One Tesseract instance, initialized for some languages (or for orientation detection).
pub struct Api {
    lib: &'static Library,
    handle: NonNull<c_void>,
}

/// What the cancel callback sees, and whether it cancelled.
struct Watch<'a> {
    stop: &'a mut dyn FnMut() -> bool,
    cancelled: bool,
}

#[expect(unsafe_code, reason = "a C callback reading the pointer it was given")]
unsafe extern "C" fn cancel_cb(this: *mut c_void, _words: c_int) -> bool {
    // A panic must not unwind into C++: it cancels instead.
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        // SAFETY: `this` is the `Watch` that `recognize` set and outlives the call.
        let watch = unsafe { &mut *this.cast::<Watch<'_>>() };
        watch.cancelled = watch.cancelled || (watch.stop)();
        watch.cancelled
    }))
    .unwrap_or(true)
}

impl Api {
    /// An instance that reads `languages` (`eng+deu`), or `None` with Tesseract's reason
    /// kept out of the terminal (it goes to /dev/null).
    #[expect(
        unsafe_code,
        reason = "Tesseract's constructor, initialization and a setter, with strings we own"
    )]
    pub fn new(lib: &'static Library, languages: &str, osd: bool) -> Result<Api, String> {
        let langs = CString::new(languages).map_err(|_| "a language with a NUL byte")?;
        // SAFETY: no arguments; the result is a new instance or null.
        let handle = unsafe { (lib.f.TessBaseAPICreate)() };
        let handle = NonNull::new(handle).ok_or("Tesseract could not make an instance")?;
        let api = Api { lib, handle };
        // Tesseract's messages ("Estimating resolution as …", and why data does not load)
        // would land on the user's terminal: they go nowhere, and failures are said here.
        api.set("debug_file", "/dev/null");
        // SAFETY: a live instance; a null data path means Tesseract's own (or
        // TESSDATA_PREFIX); the language string is NUL-ended.
        let r =
            unsafe { (lib.f.TessBaseAPIInit3)(handle.as_ptr(), std::ptr::null(), langs.as_ptr()) };
        if r != 0 {
            return Err(format!(
                "Tesseract could not load the language data {languages:?}"
            ));
        }
        let mode = if osd { PSM_OSD_ONLY } else { PSM_AUTO };
        // SAFETY: a live, initialized instance.
        unsafe { (lib.f.TessBaseAPISetPageSegMode)(handle.as_ptr(), mode) };
        Ok(api)
    }

    #[expect(
        unsafe_code,
        reason = "a setter of a live instance with strings we own"
    )]
    fn set(&self, name: &str, value: &str) -> bool {
        let (Ok(n), Ok(v)) = (CString::new(name), CString::new(value)) else {
            return false;
        };
        // SAFETY: a live instance and NUL-ended strings.
        let r = unsafe {
            (self.lib.f.TessBaseAPISetVariable)(self.handle.as_ptr(), n.as_ptr(), v.as_ptr())
        };
        r != 0
    }

    #[expect(
        unsafe_code,
        reason = "Tesseract takes its own reference of a live Pix"
    )]
    pub fn set_pix(&mut self, pix: &Pix) {
        // SAFETY: a live instance and a live Pix (Tesseract clones it).
        unsafe { (self.lib.f.TessBaseAPISetImage2)(self.handle.as_ptr(), pix.ptr.as_ptr()) };
    }

    /// Recognizes the image set last, asking `stop` between words whether to give up.
    #[expect(unsafe_code, reason = "Tesseract's progress monitor and recognition")]
    pub fn recognize(&mut self, stop: &mut dyn FnMut() -> bool) -> Recognized {
        let f = &self.lib.f;
        let mut watch = Watch {
            stop,
            cancelled: false,
        };
        // SAFETY: the monitor is created, used and deleted here; `watch` outlives the
        // recognition that calls back with it; the text and the confidences are copied
        // and freed with the functions Tesseract names for them.
        unsafe {
            let monitor = (f.TessMonitorCreate)();
            if monitor.is_null() {
                return Recognized::Failed;
            }
            (f.TessMonitorSetCancelFunc)(monitor, cancel_cb);
            (f.TessMonitorSetCancelThis)(monitor, std::ptr::addr_of_mut!(watch).cast());
            let r = (f.TessBaseAPIRecognize)(self.handle.as_ptr(), monitor);
            let progress = (f.TessMonitorGetProgress)(monitor).clamp(0, 100) as u8;
            (f.TessMonitorDelete)(monitor);
            if watch.cancelled {
                (f.TessBaseAPIClear)(self.handle.as_ptr());
                return Recognized::Cancelled { progress };
            }
            if r != 0 {
                (f.TessBaseAPIClear)(self.handle.as_ptr());
                return Recognized::Failed;
            }
            let p = (f.TessBaseAPIGetUTF8Text)(self.handle.as_ptr());
            let text = if p.is_null() {
                String::new()
            } else {
                let t = CStr::from_ptr(p).to_string_lossy().into_owned();
                (f.TessDeleteText)(p);
                t
            };
            let mut confidences = Vec::new();
            let c = (f.TessBaseAPIAllWordConfidences)(self.handle.as_ptr());
            if !c.is_null() {
                let mut i = 0;
                while *c.add(i) >= 0 {
                    confidences.push((*c.add(i)).min(100) as u8);
                    i += 1;
                }
                (f.TessDeleteIntArray)(c);
            }
            (f.TessBaseAPIClear)(self.handle.as_ptr());
            Recognized::Done { text, confidences }
        }
    }

    /// The page's orientation as quarter turns clockwise that make it upright, and the
    /// detector's confidence; `None` when it finds too little text to tell.
    #[expect(unsafe_code, reason = "Tesseract's orientation detection into locals")]
    pub fn orientation(&mut self, pix: &Pix) -> Option<(u32, f32)> {
        self.set_pix(pix);
        let (mut deg, mut conf, mut script, mut sconf) = (0, 0.0f32, std::ptr::null(), 0.0f32);
        // SAFETY: a live instance with an image set; the outputs are locals. The script
        // name points into the instance's data and is not kept.
        let ok = unsafe {
            let ok = (self.lib.f.TessBaseAPIDetectOrientationScript)(
                self.handle.as_ptr(),
                &mut deg,
                &mut conf,
                &mut script,
                &mut sconf,
            );
            (self.lib.f.TessBaseAPIClear)(self.handle.as_ptr());
            ok
        };
        // Tesseract gives the page's clockwise rotation; turning it back is the rest of
        // a full turn.
        (ok != 0).then(|| (((360 - deg.rem_euclid(360)) / 90) as u32 % 4, conf))
    }
}

impl Drop for Api {
    #[expect(unsafe_code, reason = "Tesseract's destructor")]
    fn drop(&mut self) {
        // SAFETY: a live instance, ended and deleted once.
        unsafe {
            (self.lib.f.TessBaseAPIEnd)(self.handle.as_ptr());
            (self.lib.f.TessBaseAPIDelete)(self.handle.as_ptr());
        }
    }
}
