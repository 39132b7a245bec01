"""Field rules every product's schemas share (no domain knowledge): Pydantic `AfterValidator` functions.

Each raises a `PydanticCustomError` whose message finishes the sentence "<field> ...", so the
wire formats can say which field and why (kasir.errors.from_pydantic_errors).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any

from pydantic import AfterValidator, AwareDatetime, GetCoreSchemaHandler, GetJsonSchemaHandler
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, PydanticCustomError, core_schema

from kasir.kit.clock import plausible

_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
# Issue 26: after removing spaces, `-`, `.` and parentheses, an optional `+` and 6 to 16 digits. Written
# as one expression over the value as sent (each repetition starts with a digit: no backtracking), so
# that the OpenAPI document carries the very rule the server applies.
PHONE_PATTERN = r"^[ .()-]*(\+[ .()-]*)?([0-9][ .()-]*){6,16}$"
PHONE_RULE = (
    "A phone number: after removing spaces, '-', '.' and parentheses, an optional '+' and 6 to 16 digits "
    "(0812-3456-7890, +62 812 3456 7890). Stored and echoed exactly as sent."
)
_PHONE = re.compile(PHONE_PATTERN)
# Where the interface gives a phone no length (card, wallet): 16 digits and their separators.
PHONE_MAX = 32
_URL = re.compile(r"^https?://[^\s/?#]+[^\s]*$")

# ISO 3166-1 alpha-2 and alpha-3 codes.
ISO_ALPHA2 = frozenset(
    """AD AE AF AG AI AL AM AO AQ AR AS AT AU AW AX AZ BA BB BD BE BF BG BH BI BJ BL BM BN BO BQ BR BS BT BV BW
    BY BZ CA CC CD CF CG CH CI CK CL CM CN CO CR CU CV CW CX CY CZ DE DJ DK DM DO DZ EC EE EG EH ER ES ET FI FJ FK
    FM FO FR GA GB GD GE GF GG GH GI GL GM GN GP GQ GR GS GT GU GW GY HK HM HN HR HT HU ID IE IL IM IN IO IQ IR IS
    IT JE JM JO JP KE KG KH KI KM KN KP KR KW KY KZ LA LB LC LI LK LR LS LT LU LV LY MA MC MD ME MF MG MH MK ML MM
    MN MO MP MQ MR MS MT MU MV MW MX MY MZ NA NC NE NF NG NI NL NO NP NR NU NZ OM PA PE PF PG PH PK PL PM PN PR PS
    PT PW PY QA RE RO RS RU RW SA SB SC SD SE SG SH SI SJ SK SL SM SN SO SR SS ST SV SX SY SZ TC TD TF TG TH TJ TK
    TL TM TN TO TR TT TV TW TZ UA UG UM US UY UZ VA VC VE VG VI VN VU WF WS YE YT ZA ZM ZW""".split()
)
ISO_ALPHA3 = frozenset(
    """ABW AFG AGO AIA ALA ALB AND ARE ARG ARM ASM ATA ATF ATG AUS AUT AZE BDI BEL BEN BES BFA BGD BGR BHR BHS
    BIH BLM BLR BLZ BMU BOL BRA BRB BRN BTN BVT BWA CAF CAN CCK CHE CHL CHN CIV CMR COD COG COK COL COM CPV CRI
    CUB CUW CXR CYM CYP CZE DEU DJI DMA DNK DOM DZA ECU EGY ERI ESH ESP EST ETH FIN FJI FLK FRA FRO FSM GAB GBR
    GEO GGY GHA GIB GIN GLP GMB GNB GNQ GRC GRD GRL GTM GUF GUM GUY HKG HMD HND HRV HTI HUN IDN IMN IND IOT IRL
    IRN IRQ ISL ISR ITA JAM JEY JOR JPN KAZ KEN KGZ KHM KIR KNA KOR KWT LAO LBN LBR LBY LCA LIE LKA LSO LTU LUX
    LVA MAC MAF MAR MCO MDA MDG MDV MEX MHL MKD MLI MLT MMR MNE MNG MNP MOZ MRT MSR MTQ MUS MWI MYS MYT NAM NCL
    NER NFK NGA NIC NIU NLD NOR NPL NRU NZL OMN PAK PAN PCN PER PHL PLW PNG POL PRI PRK PRT PRY PSE PYF QAT REU
    ROU RUS RWA SAU SDN SEN SGP SGS SHN SJM SLB SLE SLV SMR SOM SPM SRB SSD STP SUR SVK SVN SWE SWZ SXM SYC SYR
    TCA TCD TGO THA TJK TKL TKM TLS TON TTO TUN TUR TUV TWN TZA UGA UKR UMI URY USA UZB VAT VCT VEN VGB VIR VNM
    VUT WLF WSM YEM ZAF ZMB ZWE""".split()
)


def required(value: str) -> str:
    if not value.strip():
        raise PydanticCustomError("missing", "is required")
    return value


def email(value: str) -> str:
    if not _EMAIL.match(value):
        raise PydanticCustomError("email", "must be an email address")
    return value


def phone(value: str) -> str:
    if not _PHONE.fullmatch(value):
        raise PydanticCustomError(
            "phone", "must be a phone number: an optional + and 6 to 16 digits, with spaces, - . ( ) allowed"
        )
    return value


@dataclass(frozen=True, slots=True)
class PhoneNumber:
    """The one phone rule of every product's schemas (`Annotated[str, ..., PhoneNumber()]`): `phone`
    after the field's own type and length, and the rule as `pattern` and `description` in the OpenAPI
    schema. The value is never rewritten."""

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        return core_schema.no_info_after_validator_function(phone, handler(source))

    def __get_pydantic_json_schema__(self, schema: CoreSchema, handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        json_schema = handler(schema)
        json_schema["pattern"] = PHONE_PATTERN
        maximum = json_schema.get("maxLength")
        json_schema["description"] = PHONE_RULE + (f" At most {maximum} characters." if maximum else "")
        return json_schema


def country_code(value: str) -> str:
    if value not in ISO_ALPHA2 and value not in ISO_ALPHA3:
        raise PydanticCustomError("country", "must be an ISO 3166-1 country code, like ID or IDN")
    return value


def is_http_url(value: str) -> bool:
    """An absolute http(s) URL as every callback-URL entry point takes it: the scheme in lower case, no
    whitespace anywhere (a CR or LF included, at the end too)."""
    return _URL.fullmatch(value) is not None


def http_url(value: str) -> str:
    if not is_http_url(value):
        raise PydanticCustomError("url", "must be an absolute http(s) URL")
    return value


class Documented:
    """JSON Schema keywords for a field's OpenAPI schema, stating a rule its validators check.

    `Annotated[str, AfterValidator(email), Documented(pattern=EMAIL_PATTERN)]`: the validators stay the
    rule; this only tells the document (and the clients and fuzzers that read it) what they accept.
    """

    __slots__ = ("keywords",)

    def __init__(self, **keywords: Any) -> None:
        self.keywords = tuple(keywords.items())

    def __get_pydantic_json_schema__(self, schema: CoreSchema, handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        json_schema = handler(schema)
        json_schema.update(dict(self.keywords))
        return json_schema


# The rules above as JSON Schema (the same regular expressions; a blank string is refused by `required`).
NOT_BLANK = r"\S"
EMAIL_PATTERN = _EMAIL.pattern
URL_PATTERN = _URL.pattern
REQUIRED = Documented(minLength=1, pattern=NOT_BLANK)
EMAIL = Documented(pattern=EMAIL_PATTERN, description="An email address, like name@example.id")
URL = Documented(pattern=URL_PATTERN, description="An absolute http(s) URL")
# Not the codes as an enum: a generated client would carry a class of 500 members, and a fuzzer a case for each.
COUNTRY = Documented(pattern="^[A-Z]{2,3}$", description="An ISO 3166-1 alpha-2 or alpha-3 code, like ID or IDN")


def plausible_moment(value: datetime) -> datetime:
    """A moment a record can be from (kasir.kit.clock.plausible): year 1 with an offset is a 400, not a 500."""
    try:
        return plausible(value)
    except ValueError as exc:
        raise PydanticCustomError(
            "moment", "must be a time between the years 1970 and 9998 ({reason})", {"reason": str(exc)}
        ) from None


Moment = Annotated[AwareDatetime, AfterValidator(plausible_moment)]
"""An ISO 8601 time with its offset, within the years a record can be from."""
