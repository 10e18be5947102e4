//! The one font every plot is drawn with: DejaVu Sans, compiled into the binary
//! (`assets/DejaVuSans.ttf`, licence beside it) and registered with plotters' `ab_glyph`
//! text backend under the family name [`FONT_FAMILY`]. Nothing here reads system fonts, so
//! PNGs render the same on a machine with none installed (a fresh CI machine).

use std::sync::OnceLock;

use plotters::style::FontStyle;

/// The family name plots ask for; SVG text names it too, so a viewer substitutes its own
/// sans-serif face.
pub const FONT_FAMILY: &str = "sans-serif";

static DEJAVU_SANS: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");

/// Registers the embedded font once per process. Safe to call from every render.
pub fn ensure_registered() -> anyhow::Result<()> {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    let registered = *REGISTERED.get_or_init(|| {
        plotters::style::register_font(FONT_FAMILY, FontStyle::Normal, DEJAVU_SANS).is_ok()
    });
    anyhow::ensure!(
        registered,
        "the embedded DejaVu Sans font did not parse (assets/DejaVuSans.ttf is damaged: restore it from git)"
    );
    Ok(())
}
