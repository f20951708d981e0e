//! The request budget across the wire (feature `http`): which header
//! carries it ([`BudgetHeader`]), the server side ([`InboundDeadlineLayer`]:
//! start the handler's [`Deadline`](crate::deadline::Deadline) from the
//! caller's budget, refuse at admission) and the client side
//! ([`OutboundDeadlineLayer`]: send what is left minus a margin, cut the
//! call at the deadline).

mod inbound;
mod outbound;

pub use inbound::{
    InboundDeadline, InboundDeadlineError, InboundDeadlineFuture, InboundDeadlineLayer,
};
pub use outbound::{
    OutboundDeadline, OutboundDeadlineError, OutboundDeadlineFuture, OutboundDeadlineLayer,
};

use core::time::Duration;

use http::header::{HeaderMap, HeaderName, HeaderValue};

use crate::deadline::wire::{Format, ParseError, GRPC_TIMEOUT, TIMEOUT_MS};

/// The header a request budget travels in, and its [`Format`]:
/// [`BudgetHeader::millis`] (`x-request-timeout-ms`, the default) for
/// HTTP services, [`BudgetHeader::grpc_timeout`] for gRPC (tonic), or
/// whole milliseconds under a name of your own
/// ([`BudgetHeader::millis_named`]).
///
/// # Examples
///
/// ```
/// use http::HeaderName;
/// use watertight::deadline::wire::Format;
/// use watertight::tower::BudgetHeader;
///
/// assert_eq!(BudgetHeader::default().name().as_str(), "x-request-timeout-ms");
/// assert_eq!(BudgetHeader::grpc_timeout().format(), Format::GrpcTimeout);
/// let envoy = BudgetHeader::millis_named(HeaderName::from_static("x-envoy-expected-rq-timeout-ms"));
/// assert_eq!(envoy.format(), Format::Millis);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BudgetHeader {
    format: Format,
    name: HeaderName,
}

impl BudgetHeader {
    /// `grpc-timeout`, as gRPC sends it (at most 8 digits and a unit).
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::tower::BudgetHeader;
    /// assert_eq!(BudgetHeader::grpc_timeout().name().as_str(), "grpc-timeout");
    /// ```
    pub fn grpc_timeout() -> Self {
        BudgetHeader {
            format: Format::GrpcTimeout,
            name: HeaderName::from_static(GRPC_TIMEOUT),
        }
    }

    /// Whole milliseconds in `x-request-timeout-ms`
    /// ([`TIMEOUT_MS`](crate::deadline::wire::TIMEOUT_MS): why that name).
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::tower::BudgetHeader;
    /// assert_eq!(BudgetHeader::millis(), BudgetHeader::default());
    /// ```
    pub fn millis() -> Self {
        BudgetHeader {
            format: Format::Millis,
            name: HeaderName::from_static(TIMEOUT_MS),
        }
    }

    /// Whole milliseconds under the header `name`.
    ///
    /// # Examples
    ///
    /// ```
    /// use http::HeaderName;
    /// use watertight::tower::BudgetHeader;
    /// let h = BudgetHeader::millis_named(HeaderName::from_static("x-budget-ms"));
    /// assert_eq!(h.name().as_str(), "x-budget-ms");
    /// ```
    pub fn millis_named(name: HeaderName) -> Self {
        BudgetHeader {
            format: Format::Millis,
            name,
        }
    }

    /// The header's name.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::tower::BudgetHeader;
    /// assert_eq!(BudgetHeader::grpc_timeout().name(), "grpc-timeout");
    /// ```
    pub fn name(&self) -> &HeaderName {
        &self.name
    }

    /// The value's format.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::deadline::wire::Format;
    /// use watertight::tower::BudgetHeader;
    /// assert_eq!(BudgetHeader::millis().format(), Format::Millis);
    /// ```
    pub fn format(&self) -> Format {
        self.format
    }

    /// The budget `headers` carry: `None` without the header; the smallest
    /// if it is there more than once (a budget never grows).
    ///
    /// # Errors
    ///
    /// The [`ParseError`] of the first value that is not a budget.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use http::{HeaderMap, HeaderValue};
    /// use watertight::deadline::wire::ParseError;
    /// use watertight::tower::BudgetHeader;
    ///
    /// let h = BudgetHeader::millis();
    /// let mut headers = HeaderMap::new();
    /// assert_eq!(h.read(&headers), Ok(None));
    /// headers.append("x-request-timeout-ms", HeaderValue::from_static("300"));
    /// headers.append("x-request-timeout-ms", HeaderValue::from_static("200"));
    /// assert_eq!(h.read(&headers), Ok(Some(Duration::from_millis(200))));
    /// headers.insert("x-request-timeout-ms", HeaderValue::from_static("soon"));
    /// assert_eq!(h.read(&headers), Err(ParseError::InvalidDigit));
    /// ```
    pub fn read(&self, headers: &HeaderMap) -> Result<Option<Duration>, ParseError> {
        let mut budget: Option<Duration> = None;
        for value in headers.get_all(&self.name) {
            let b = self.format.parse(value.as_bytes())?;
            budget = Some(budget.map_or(b, |least| least.min(b)));
        }
        Ok(budget)
    }

    /// Sets the header to `budget`, rounded down, replacing any value it
    /// had.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use http::HeaderMap;
    /// use watertight::tower::BudgetHeader;
    ///
    /// let mut headers = HeaderMap::new();
    /// BudgetHeader::grpc_timeout().write(&mut headers, Duration::from_millis(250));
    /// assert_eq!(headers["grpc-timeout"], "250000u");
    /// ```
    pub fn write(&self, headers: &mut HeaderMap, budget: Duration) {
        let encoded = self.format.encode(budget);
        // Digits and a unit letter: always a valid header value.
        if let Ok(value) = HeaderValue::from_bytes(encoded.as_bytes()) {
            headers.insert(self.name.clone(), value);
        }
    }
}

impl Default for BudgetHeader {
    /// [`BudgetHeader::millis`].
    fn default() -> Self {
        BudgetHeader::millis()
    }
}
