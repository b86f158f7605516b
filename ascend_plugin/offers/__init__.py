"""Offers: how the node's chips are offered, as devices of one or more extended resources.

Each offer (whole chips or shares, static vNPUs) turns the inventory into
:class:`~.base.OfferedDevice` s; :class:`~.book.OfferBook` groups them by resource
for the faces, which know nothing of how the devices were made.
"""
