//! What an object id names: its content kind, size, cachability and life cycle, drawn from
//! Web Polygraph's PolyMix-4 content mix ([`ContentMix::polymix4`]) with draws that depend
//! only on (seed, id), so `coldwire origin` and the robots agree on every object.
//!
//! Life cycle: an object is modified every `period` (drawn once per object from its kind's
//! life-cycle distribution) from a per-object phase; `Last-Modified` is the last
//! modification at or before now, and — as PolyMix's `expires = [nmt + const(0sec)]` —
//! it expires exactly at the next one. The version (how many modifications so far) is part
//! of the `ETag` and of the body, so a stale body served as fresh is detected.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::draws::{exponential, log_normal, unit};

/// The kinds of content PolyMix-4 serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ContentKind {
    /// `.gif .jpeg .png`: reached only as embedded objects of HTML.
    Image,
    /// `.html`, `.htm`.
    Html,
    /// `.exe .zip .gz`.
    Download,
    /// Everything else.
    Other,
}

impl ContentKind {
    /// The `Content-Type` sent.
    pub fn content_type(self) -> &'static str {
        match self {
            ContentKind::Image => "image/gif",
            ContentKind::Html => "text/html",
            ContentKind::Download => "application/octet-stream",
            ContentKind::Other => "application/x-coldwire-other",
        }
    }

    /// Its name in reports.
    pub fn name(self) -> &'static str {
        match self {
            ContentKind::Image => "image",
            ContentKind::Html => "html",
            ContentKind::Download => "download",
            ContentKind::Other => "other",
        }
    }
}

/// How one kind's objects are drawn.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct KindModel {
    /// The kind.
    pub kind: ContentKind,
    /// Share of objects (the shares of a mix add up to 1).
    pub share: f64,
    /// Size distribution.
    pub size: Distribution,
    /// Share of cachable objects of this kind.
    pub cachable: f64,
    /// Modification period distribution, in seconds.
    pub life_cycle: Distribution,
}

/// The distributions Polygraph's content definitions use.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Distribution {
    /// `exp(mean)`.
    Exponential {
        /// Mean.
        mean: f64,
    },
    /// `logn(mean, sd)`.
    LogNormal {
        /// Mean.
        mean: f64,
        /// Standard deviation.
        sd: f64,
    },
    /// `unif(low, high)`.
    Uniform {
        /// Lowest value.
        low: f64,
        /// Highest value.
        high: f64,
    },
    /// Always this value.
    Constant(f64),
}

impl Distribution {
    fn draw(self, first: f64, second: f64) -> f64 {
        match self {
            Distribution::Exponential { mean } => exponential(mean, first),
            Distribution::LogNormal { mean, sd } => log_normal(mean, sd, first, second),
            Distribution::Uniform { low, high } => low + (high - low) * first,
            Distribution::Constant(value) => value,
        }
    }

    /// The distribution's mean.
    pub fn mean(self) -> f64 {
        match self {
            Distribution::Exponential { mean } | Distribution::LogNormal { mean, .. } => mean,
            Distribution::Uniform { low, high } => (low + high) / 2.0,
            Distribution::Constant(value) => value,
        }
    }
}

/// A content mix: the kinds, their shares and models.
#[derive(Clone, Debug, PartialEq)]
pub struct ContentMix {
    /// The kinds, in the order their shares are cumulated.
    pub kinds: Vec<KindModel>,
    /// Seed of every per-object draw.
    pub seed: u64,
}

const DAY: f64 = 86_400.0;
const KB: f64 = 1024.0;

impl ContentMix {
    /// PolyMix-4 (`polymix-4-guts.pg`, `contents.pg`): images 65% `exp(4.5KB)` 80% cachable
    /// `logn(30day, 7day)`; HTML 15% `exp(8.5KB)` 90% `logn(7day, 1day)`; downloads 0.5%
    /// `logn(300KB, 300KB)` 95% `logn(0.5year, 30day)`; other 19.5% `logn(25KB, 10KB)` 72%
    /// `unif(1day, 1year)`. Mean object size 10.6 KB, 80% cachable.
    pub fn polymix4(seed: u64) -> ContentMix {
        let kind = |kind, share, size, cachable, life_cycle| KindModel {
            kind,
            share,
            size,
            cachable,
            life_cycle,
        };
        ContentMix {
            kinds: vec![
                kind(
                    ContentKind::Image,
                    0.65,
                    Distribution::Exponential { mean: 4.5 * KB },
                    0.80,
                    Distribution::LogNormal {
                        mean: 30.0 * DAY,
                        sd: 7.0 * DAY,
                    },
                ),
                kind(
                    ContentKind::Html,
                    0.15,
                    Distribution::Exponential { mean: 8.5 * KB },
                    0.90,
                    Distribution::LogNormal {
                        mean: 7.0 * DAY,
                        sd: DAY,
                    },
                ),
                kind(
                    ContentKind::Download,
                    0.005,
                    Distribution::LogNormal {
                        mean: 300.0 * KB,
                        sd: 300.0 * KB,
                    },
                    0.95,
                    Distribution::LogNormal {
                        mean: 182.5 * DAY,
                        sd: 30.0 * DAY,
                    },
                ),
                kind(
                    ContentKind::Other,
                    0.195,
                    Distribution::LogNormal {
                        mean: 25.0 * KB,
                        sd: 10.0 * KB,
                    },
                    0.72,
                    Distribution::Uniform {
                        low: DAY,
                        high: 365.0 * DAY,
                    },
                ),
            ],
            seed,
        }
    }

    /// One kind of content only, of `size` bytes, all cachable with a two-year life cycle
    /// (microbenchmarks: every object alike).
    pub fn fixed(size: u64, seed: u64) -> ContentMix {
        ContentMix {
            kinds: vec![KindModel {
                kind: ContentKind::Other,
                share: 1.0,
                size: Distribution::Constant(size as f64),
                cachable: 1.0,
                life_cycle: Distribution::Constant(730.0 * DAY),
            }],
            seed,
        }
    }

    /// The mean object size of the mix, in bytes.
    pub fn mean_size(&self) -> f64 {
        self.kinds
            .iter()
            .map(|kind| kind.share * kind.size.mean())
            .sum()
    }

    /// The object `id` names, as of `now`.
    pub fn object(&self, id: u64, now: SystemTime) -> Object {
        let seed = self.seed;
        let pick = unit(seed, id, 1);
        let mut cumulated = 0.0;
        let model = self
            .kinds
            .iter()
            .find(|kind| {
                cumulated += kind.share;
                pick < cumulated
            })
            .or(self.kinds.last())
            .copied()
            .unwrap_or(KindModel {
                kind: ContentKind::Other,
                share: 1.0,
                size: Distribution::Constant(0.0),
                cachable: 0.0,
                life_cycle: Distribution::Constant(DAY),
            });
        let size = model
            .size
            .draw(unit(seed, id, 2), unit(seed, id, 3))
            .round()
            .clamp(0.0, (1u64 << 40) as f64) as u64;
        let cachable = unit(seed, id, 4) < model.cachable;
        let period = model
            .life_cycle
            .draw(unit(seed, id, 5), unit(seed, id, 6))
            .max(60.0);
        let phase = unit(seed, id, 7) * period;
        let now_seconds = now
            .duration_since(UNIX_EPOCH)
            .unwrap_or(Duration::ZERO)
            .as_secs_f64();
        let version = ((now_seconds - phase) / period).floor().max(0.0) as u64;
        let modified = phase + version as f64 * period;
        let next = modified + period;
        Object {
            id,
            kind: model.kind,
            size,
            cachable,
            version,
            last_modified: UNIX_EPOCH + Duration::from_secs(modified as u64),
            expires: UNIX_EPOCH + Duration::from_secs(next as u64),
        }
    }
}

/// One object, as of a moment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Object {
    /// Its id.
    pub id: u64,
    /// Its kind.
    pub kind: ContentKind,
    /// Body size in bytes.
    pub size: u64,
    /// Whether it may be cached (`Cache-Control: max-age` until it expires) or not
    /// (`no-store`).
    pub cachable: bool,
    /// Modifications so far (in the `ETag` and the body).
    pub version: u64,
    /// When it was last modified.
    pub last_modified: SystemTime,
    /// When it will next be modified (and so expires).
    pub expires: SystemTime,
}

impl Object {
    /// Its entity tag, `"<id hex>-<version hex>"`.
    pub fn etag(&self) -> String {
        format!("\"{:x}-{:x}\"", self.id, self.version)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn polymix4_mix_has_its_published_shares_sizes_and_cachability() {
        let mix = ContentMix::polymix4(5);
        let now = SystemTime::now();
        let n = 200_000u64;
        let objects: Vec<Object> = (0..n).map(|id| mix.object(id, now)).collect();
        let share =
            |kind| objects.iter().filter(|object| object.kind == kind).count() as f64 / n as f64;
        assert!((share(ContentKind::Image) - 0.65).abs() < 0.01);
        assert!((share(ContentKind::Html) - 0.15).abs() < 0.01);
        assert!((share(ContentKind::Other) - 0.195).abs() < 0.01);
        let mean = objects.iter().map(|object| object.size as f64).sum::<f64>() / n as f64;
        assert!(
            (mean - mix.mean_size()).abs() / mix.mean_size() < 0.05,
            "{mean} vs {}",
            mix.mean_size()
        );
        assert!((mix.mean_size() / 1024.0 - 10.575).abs() < 0.01);
        let cachable = objects.iter().filter(|object| object.cachable).count() as f64 / n as f64;
        assert!((cachable - 0.80).abs() < 0.01, "{cachable}");
    }

    #[test]
    fn an_object_is_the_same_for_everyone_and_changes_only_at_its_expiry() {
        let mix = ContentMix::polymix4(5);
        let now = SystemTime::now();
        for id in 0..1000 {
            let object = mix.object(id, now);
            assert_eq!(object, ContentMix::polymix4(5).object(id, now));
            assert!(object.last_modified <= now && now < object.expires);
            let just_before = object.expires - Duration::from_secs(1);
            assert_eq!(mix.object(id, just_before).version, object.version);
            let after = mix.object(id, object.expires + Duration::from_secs(1));
            assert_eq!(after.version, object.version + 1);
            assert_eq!(after.last_modified, object.expires);
        }
    }
}
