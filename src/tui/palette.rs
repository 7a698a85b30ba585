//! How many colours to use: none (`NO_COLOR`, `--color never`, not a terminal), the
//! xterm 256-colour palette, or 24-bit colour when the terminal says it has it
//! (`COLORTERM=truecolor` or `24bit`). 24-bit theme colours shown on a 256-colour
//! terminal are mapped to the nearest palette colour.

use ratatui::style::Color;

/// `--color`: whether to colour output.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum ColorChoice {
    /// Colour on a terminal, unless `NO_COLOR` is set (and not empty) or `TERM=dumb`.
    #[default]
    Auto,
    /// Always colour, even through a pipe or with `NO_COLOR` set.
    Always,
    /// Never colour.
    Never,
}

/// The colours output may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Colours {
    /// The terminal's own colours only: no escape sequences of ours.
    None,
    /// The xterm 256-colour palette.
    Palette256,
    /// 24-bit colour.
    TrueColor,
}

impl Colours {
    /// What `choice` gives with this process's environment, for output to a terminal
    /// or not.
    pub fn resolve(choice: ColorChoice, terminal: bool) -> Self {
        Self::resolve_with(choice, terminal, |name| std::env::var(name).ok())
    }

    /// [`resolve`](Self::resolve) reading the environment through `env`.
    pub fn resolve_with(
        choice: ColorChoice,
        terminal: bool,
        env: impl Fn(&str) -> Option<String>,
    ) -> Self {
        let set = |name: &str| env(name).is_some_and(|v| !v.is_empty());
        let on = match choice {
            ColorChoice::Never => false,
            ColorChoice::Always => true,
            ColorChoice::Auto => {
                terminal && !set("NO_COLOR") && env("TERM").as_deref() != Some("dumb")
            }
        };
        if !on {
            Colours::None
        } else if matches!(env("COLORTERM").as_deref(), Some("truecolor" | "24bit")) {
            Colours::TrueColor
        } else {
            Colours::Palette256
        }
    }

    /// `color` as these colours can show it: 24-bit colours become the nearest of the
    /// 256-colour palette on such terminals; with no colours, every colour is the
    /// terminal's own.
    pub fn fit(self, color: Color) -> Color {
        match (self, color) {
            (Colours::None, _) => Color::Reset,
            (Colours::Palette256, Color::Rgb(r, g, b)) => Color::Indexed(nearest_256(r, g, b)),
            (_, color) => color,
        }
    }
}

/// The levels of each channel in the palette's 6×6×6 colour cube (colours 16–231).
const CUBE: [u8; 6] = [0, 95, 135, 175, 215, 255];

/// The xterm-256 colour nearest to `(r, g, b)`, from the colour cube (16–231) and the
/// grey ramp (232–255); the first sixteen are left out, as terminals redefine them.
pub fn nearest_256(r: u8, g: u8, b: u8) -> u8 {
    let level = |v: u8| -> usize {
        // The cube level nearest to v: the levels are 0, then 95 + 40·k.
        CUBE.iter()
            .enumerate()
            .min_by_key(|(_, l)| (i32::from(**l) - i32::from(v)).abs())
            .map_or(0, |(i, _)| i)
    };
    let (ri, gi, bi) = (level(r), level(g), level(b));
    let cube = (CUBE[ri], CUBE[gi], CUBE[bi]);
    let cube_index = 16 + 36 * ri + 6 * gi + bi;
    // The grey ramp: 8, 18, … 238.
    let mean = (u32::from(r) + u32::from(g) + u32::from(b)) / 3;
    let grey_step = (mean.saturating_sub(3) / 10).min(23);
    let grey = (8 + 10 * grey_step) as u8;
    let distance = |(cr, cg, cb): (u8, u8, u8)| {
        let d = |a: u8, b: u8| (i32::from(a) - i32::from(b)).pow(2);
        d(cr, r) + d(cg, g) + d(cb, b)
    };
    if distance((grey, grey, grey)) < distance(cube) {
        232 + grey_step as u8
    } else {
        cube_index as u8
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| {
            vars.iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| (*v).to_owned())
        }
    }

    #[test]
    fn no_color_and_the_flag_decide_whether_to_colour() {
        let auto = ColorChoice::Auto;
        let truecolor = [("COLORTERM", "truecolor")];
        assert_eq!(
            Colours::resolve_with(auto, true, env(&truecolor)),
            Colours::TrueColor
        );
        assert_eq!(
            Colours::resolve_with(auto, true, env(&[("NO_COLOR", "1")])),
            Colours::None
        );
        // Set but empty is not set.
        assert_eq!(
            Colours::resolve_with(auto, true, env(&[("NO_COLOR", "")])),
            Colours::Palette256
        );
        assert_eq!(
            Colours::resolve_with(auto, true, env(&[("TERM", "dumb")])),
            Colours::None
        );
        assert_eq!(Colours::resolve_with(auto, false, env(&[])), Colours::None);
        // The flag wins over the environment, both ways.
        assert_eq!(
            Colours::resolve_with(ColorChoice::Always, false, env(&[("NO_COLOR", "1")])),
            Colours::Palette256
        );
        assert_eq!(
            Colours::resolve_with(ColorChoice::Never, true, env(&truecolor)),
            Colours::None
        );
        assert_eq!(
            Colours::resolve_with(auto, true, env(&[("COLORTERM", "24bit")])),
            Colours::TrueColor
        );
    }

    #[test]
    fn rgb_maps_to_the_nearest_palette_colour() {
        // Exact cube and grey colours map to themselves.
        assert_eq!(nearest_256(0, 0, 0), 16);
        assert_eq!(nearest_256(255, 255, 255), 231);
        assert_eq!(nearest_256(255, 0, 0), 196);
        assert_eq!(nearest_256(0x87, 0xaf, 0xd7), 110);
        assert_eq!(nearest_256(8, 8, 8), 232);
        assert_eq!(nearest_256(238, 238, 238), 255);
        // Near-greys go to the ramp, which is finer than the cube's greys.
        assert_eq!(nearest_256(0x30, 0x30, 0x30), 236);
        // The dark theme's waiting yellow (#ebcb8b): the cube's #d7d787 (186); its
        // status bar (#2e3440), the grey #3a3a3a (237).
        assert_eq!(nearest_256(0xeb, 0xcb, 0x8b), 186);
        assert_eq!(nearest_256(0x2e, 0x34, 0x40), 237);
        // Nord's frost (#88c0d0) is nearest #87afd7 (110).
        assert_eq!(nearest_256(0x88, 0xc0, 0xd0), 110);
    }

    #[test]
    fn fitting_keeps_or_drops_colours_by_what_the_terminal_has() {
        let rgb = Color::Rgb(255, 0, 0);
        assert_eq!(Colours::TrueColor.fit(rgb), rgb);
        assert_eq!(Colours::Palette256.fit(rgb), Color::Indexed(196));
        assert_eq!(Colours::Palette256.fit(Color::Red), Color::Red);
        assert_eq!(Colours::None.fit(rgb), Color::Reset);
        assert_eq!(Colours::None.fit(Color::Red), Color::Reset);
    }
}
