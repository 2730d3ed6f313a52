//! One way to wrap a [`crate::Transport`]: [`forward_transport!`] writes the whole
//! `impl Transport` of a wrapper, with the methods the wrapper writes itself and every other
//! method of the trait handed to the transport inside it unchanged, so a wrapper spells out
//! only what it adds (counting sends, moving sends to a topic made anew).
//!
//! Why a macro: two wrappers forwarded every method by hand, and each method the trait
//! gained had to be added to both; one that was not (`react`, `draft` behind the metrics'
//! counting wrapper) silently fell back to the trait's default "cannot", so reactions and
//! streamed drafts stopped whenever `--metrics` was on.
//!
//! Why the whole impl and not a list of methods to forward: a list is the same trap one
//! level up. A method left off it (or named as the wrapper's own and then not written) still
//! takes the trait's default without a word. Here the macro holds the one list of the
//! trait's methods and forwards each one the wrapper does not write, so no method can be
//! neither; a unit test below holds that list equal to the methods `lib.rs` declares, so a
//! method added to the trait fails the tests until it is added here too.
//!
//! The forwarded methods are written in the shape `#[async_trait]` gives the trait's async
//! methods (a boxed future, one lifetime per borrowed argument): they hand the inner
//! transport's future back as it is, with no second box around it.

/// The attribute [`forward_transport!`]'s impl carries, named through `$crate` so a wrapper's
/// crate needs no `async-trait` of its own (nor the same version of it).
#[doc(hidden)]
pub use async_trait::async_trait;

/// Writes `impl Transport for Wrapper` (under `#[async_trait]`): the methods written inside
/// as they are, and every other method of the trait forwarded to the field named after `=>`
/// (an `Arc<dyn Transport>` or any `Transport`), unchanged:
///
/// ```ignore
/// transport_core::forward_transport! {
///     impl Transport for Counted => inner {
///         async fn send(&self, message: OutboundMessage) -> Result<SendReceipt, TransportError> {
///             /* counted */
///         }
///     }
/// }
/// ```
///
/// The wrapper's own methods are `fn` or `async fn` items with attributes (doc comments)
/// but no generics or `where` clause, as every method of the trait is.
#[macro_export]
macro_rules! forward_transport {
    (impl Transport for $wrapper:ident => $inner:ident { $($own:tt)* }) => {
        $crate::forward_transport!(@own $wrapper $inner [] [] $($own)*);
    };
    // The wrapper's own methods, one at a time: their names go to the list of what is not
    // forwarded, their tokens to the impl unchanged (async ones for `#[async_trait]`).
    (@own $wrapper:ident $inner:ident [$($names:ident)*] [$($written:tt)*]
        $(#[$attribute:meta])* async fn $name:ident $arguments:tt $(-> $answer:ty)? $body:block
        $($rest:tt)*
    ) => {
        $crate::forward_transport!(@own $wrapper $inner [$($names)* $name] [$($written)*
            $(#[$attribute])* async fn $name $arguments $(-> $answer)? $body
        ] $($rest)*);
    };
    (@own $wrapper:ident $inner:ident [$($names:ident)*] [$($written:tt)*]
        $(#[$attribute:meta])* fn $name:ident $arguments:tt $(-> $answer:ty)? $body:block
        $($rest:tt)*
    ) => {
        $crate::forward_transport!(@own $wrapper $inner [$($names)* $name] [$($written)*
            $(#[$attribute])* fn $name $arguments $(-> $answer)? $body
        ] $($rest)*);
    };
    (@own $wrapper:ident $inner:ident [$($names:ident)*] [$($written:tt)*]) => {
        #[$crate::forward::async_trait]
        impl $crate::Transport for $wrapper {
            $($written)*
            $crate::forward_transport!(@methods @rest $inner [$($names)*]);
        }
    };
    // The one list of the trait's methods, handed to `$($then)*`. A method missing here
    // fails `forwarding_lists_every_method_of_the_trait`; one that is not the trait's fails
    // the build of every wrapper.
    (@methods $($then:tt)*) => {
        // Braces: the list ends in items (an impl's methods) or in an expression (the
        // names), and only a braced call may stand for either.
        $crate::forward_transport! { $($then)*
            id capabilities identify start stop send typing react draft fetch_attachment
            max_upload_bytes send_file topic_place topic_naming create_topic
            topics_in_private_chats create_private_topic resume_topic end_topic topic_gone
            diagnose
        }
    };
    (@names $($method:ident)*) => {
        [$(stringify!($method)),*]
    };
    (@rest $inner:ident [$($own:ident)*] $method:ident $($more:ident)*) => {
        $crate::forward_transport!(@unless_own $inner $method [$($own)*]);
        $crate::forward_transport!(@rest $inner [$($own)*] $($more)*);
    };
    (@rest $inner:ident [$($own:ident)*]) => {};
    // Whether the wrapper wrote `$method` itself: macro_rules compares a name only with a
    // name written in a rule, hence one rule a method.
    (@unless_own $inner:ident id [id $($others:ident)*]) => {};
    (@unless_own $inner:ident capabilities [capabilities $($others:ident)*]) => {};
    (@unless_own $inner:ident identify [identify $($others:ident)*]) => {};
    (@unless_own $inner:ident start [start $($others:ident)*]) => {};
    (@unless_own $inner:ident stop [stop $($others:ident)*]) => {};
    (@unless_own $inner:ident send [send $($others:ident)*]) => {};
    (@unless_own $inner:ident typing [typing $($others:ident)*]) => {};
    (@unless_own $inner:ident react [react $($others:ident)*]) => {};
    (@unless_own $inner:ident draft [draft $($others:ident)*]) => {};
    (@unless_own $inner:ident fetch_attachment [fetch_attachment $($others:ident)*]) => {};
    (@unless_own $inner:ident max_upload_bytes [max_upload_bytes $($others:ident)*]) => {};
    (@unless_own $inner:ident send_file [send_file $($others:ident)*]) => {};
    (@unless_own $inner:ident topic_place [topic_place $($others:ident)*]) => {};
    (@unless_own $inner:ident topic_naming [topic_naming $($others:ident)*]) => {};
    (@unless_own $inner:ident create_topic [create_topic $($others:ident)*]) => {};
    (@unless_own $inner:ident topics_in_private_chats
        [topics_in_private_chats $($others:ident)*]) => {};
    (@unless_own $inner:ident create_private_topic [create_private_topic $($others:ident)*]) => {};
    (@unless_own $inner:ident resume_topic [resume_topic $($others:ident)*]) => {};
    (@unless_own $inner:ident end_topic [end_topic $($others:ident)*]) => {};
    (@unless_own $inner:ident topic_gone [topic_gone $($others:ident)*]) => {};
    (@unless_own $inner:ident diagnose [diagnose $($others:ident)*]) => {};
    (@unless_own $inner:ident $method:ident [$_first:ident $($others:ident)*]) => {
        $crate::forward_transport!(@unless_own $inner $method [$($others)*]);
    };
    (@unless_own $inner:ident $method:ident []) => {
        $crate::forward_transport!(@one $inner $method);
    };
    (@one $inner:ident id) => {
        fn id(&self) -> &str {
            self.$inner.id()
        }
    };
    (@one $inner:ident capabilities) => {
        fn capabilities(&self) -> $crate::Capabilities {
            self.$inner.capabilities()
        }
    };
    (@one $inner:ident max_upload_bytes) => {
        fn max_upload_bytes(&self) -> u64 {
            self.$inner.max_upload_bytes()
        }
    };
    (@one $inner:ident topic_place) => {
        fn topic_place(&self) -> Option<String> {
            self.$inner.topic_place()
        }
    };
    (@one $inner:ident topic_naming) => {
        fn topic_naming(&self) -> $crate::TopicNaming {
            self.$inner.topic_naming()
        }
    };
    (@one $inner:ident topics_in_private_chats) => {
        fn topics_in_private_chats(&self) -> bool {
            self.$inner.topics_in_private_chats()
        }
    };
    (@one $inner:ident topic_gone) => {
        fn topic_gone(&self, error: &$crate::TransportError) -> bool {
            self.$inner.topic_gone(error)
        }
    };
    (@one $inner:ident diagnose) => {
        fn diagnose(&self) -> String {
            self.$inner.diagnose()
        }
    };
    (@one $inner:ident identify) => {
        fn identify<'life0, 'async_trait>(
            &'life0 self,
        ) -> $crate::forward::Boxed<'async_trait, Result<$crate::BotIdentity, $crate::TransportError>>
        where
            'life0: 'async_trait,
            Self: 'async_trait,
        {
            self.$inner.identify()
        }
    };
    (@one $inner:ident start) => {
        fn start<'life0, 'async_trait>(
            &'life0 self,
            sink: $crate::InboundSink,
        ) -> $crate::forward::Boxed<'async_trait, Result<(), $crate::TransportError>>
        where
            'life0: 'async_trait,
            Self: 'async_trait,
        {
            self.$inner.start(sink)
        }
    };
    (@one $inner:ident stop) => {
        fn stop<'life0, 'async_trait>(&'life0 self) -> $crate::forward::Boxed<'async_trait, ()>
        where
            'life0: 'async_trait,
            Self: 'async_trait,
        {
            self.$inner.stop()
        }
    };
    (@one $inner:ident send) => {
        fn send<'life0, 'async_trait>(
            &'life0 self,
            message: $crate::OutboundMessage,
        ) -> $crate::forward::Boxed<'async_trait, Result<$crate::SendReceipt, $crate::TransportError>>
        where
            'life0: 'async_trait,
            Self: 'async_trait,
        {
            self.$inner.send(message)
        }
    };
    (@one $inner:ident typing) => {
        fn typing<'life0, 'life1, 'life2, 'async_trait>(
            &'life0 self,
            conversation_id: &'life1 str,
            thread_id: Option<&'life2 str>,
        ) -> $crate::forward::Boxed<'async_trait, Result<(), $crate::TransportError>>
        where
            'life0: 'async_trait,
            'life1: 'async_trait,
            'life2: 'async_trait,
            Self: 'async_trait,
        {
            self.$inner.typing(conversation_id, thread_id)
        }
    };
    (@one $inner:ident react) => {
        fn react<'life0, 'life1, 'life2, 'async_trait>(
            &'life0 self,
            conversation_id: &'life1 str,
            message_id: &'life2 str,
            reaction: $crate::Reaction,
            replaces: Option<$crate::Reaction>,
        ) -> $crate::forward::Boxed<'async_trait, Result<(), $crate::TransportError>>
        where
            'life0: 'async_trait,
            'life1: 'async_trait,
            'life2: 'async_trait,
            Self: 'async_trait,
        {
            self.$inner
                .react(conversation_id, message_id, reaction, replaces)
        }
    };
    (@one $inner:ident draft) => {
        fn draft<'life0, 'life1, 'life2, 'life3, 'async_trait>(
            &'life0 self,
            conversation_id: &'life1 str,
            thread_id: Option<&'life2 str>,
            draft_id: u64,
            text: &'life3 str,
        ) -> $crate::forward::Boxed<'async_trait, Result<(), $crate::TransportError>>
        where
            'life0: 'async_trait,
            'life1: 'async_trait,
            'life2: 'async_trait,
            'life3: 'async_trait,
            Self: 'async_trait,
        {
            self.$inner.draft(conversation_id, thread_id, draft_id, text)
        }
    };
    (@one $inner:ident fetch_attachment) => {
        fn fetch_attachment<'life0, 'life1, 'async_trait>(
            &'life0 self,
            reference: &'life1 str,
            max_bytes: u64,
        ) -> $crate::forward::Boxed<
            'async_trait,
            Result<$crate::FetchedAttachment, $crate::TransportError>,
        >
        where
            'life0: 'async_trait,
            'life1: 'async_trait,
            Self: 'async_trait,
        {
            self.$inner.fetch_attachment(reference, max_bytes)
        }
    };
    (@one $inner:ident send_file) => {
        fn send_file<'life0, 'async_trait>(
            &'life0 self,
            file: $crate::OutboundFile,
        ) -> $crate::forward::Boxed<'async_trait, Result<$crate::SendReceipt, $crate::TransportError>>
        where
            'life0: 'async_trait,
            Self: 'async_trait,
        {
            self.$inner.send_file(file)
        }
    };
    (@one $inner:ident create_topic) => {
        fn create_topic<'life0, 'life1, 'async_trait>(
            &'life0 self,
            name: &'life1 str,
        ) -> $crate::forward::Boxed<'async_trait, Result<$crate::Topic, $crate::TopicError>>
        where
            'life0: 'async_trait,
            'life1: 'async_trait,
            Self: 'async_trait,
        {
            self.$inner.create_topic(name)
        }
    };
    (@one $inner:ident create_private_topic) => {
        fn create_private_topic<'life0, 'life1, 'life2, 'async_trait>(
            &'life0 self,
            chat_id: &'life1 str,
            name: &'life2 str,
        ) -> $crate::forward::Boxed<'async_trait, Result<$crate::Topic, $crate::TopicError>>
        where
            'life0: 'async_trait,
            'life1: 'async_trait,
            'life2: 'async_trait,
            Self: 'async_trait,
        {
            self.$inner.create_private_topic(chat_id, name)
        }
    };
    (@one $inner:ident resume_topic) => {
        fn resume_topic<'life0, 'life1, 'life2, 'async_trait>(
            &'life0 self,
            topic: &'life1 $crate::Topic,
            name: &'life2 str,
        ) -> $crate::forward::Boxed<'async_trait, Result<(), $crate::TopicError>>
        where
            'life0: 'async_trait,
            'life1: 'async_trait,
            'life2: 'async_trait,
            Self: 'async_trait,
        {
            self.$inner.resume_topic(topic, name)
        }
    };
    (@one $inner:ident end_topic) => {
        fn end_topic<'life0, 'life1, 'life2, 'async_trait>(
            &'life0 self,
            topic: &'life1 $crate::Topic,
            name: &'life2 str,
        ) -> $crate::forward::Boxed<'async_trait, Result<(), $crate::TopicError>>
        where
            'life0: 'async_trait,
            'life1: 'async_trait,
            'life2: 'async_trait,
            Self: 'async_trait,
        {
            self.$inner.end_topic(topic, name)
        }
    };
}

/// The future an `#[async_trait]` method returns: what [`forward_transport!`]'s methods
/// hand back from the inner transport as it is.
pub type Boxed<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;

#[cfg(test)]
mod tests {
    /// The macro's list of methods is the trait's: a method added to `Transport` and not to
    /// the list would be left to its default behind every wrapper (the `--metrics` loss of
    /// reactions and drafts), so it fails here first.
    #[test]
    fn forwarding_lists_every_method_of_the_trait() {
        let mut listed = crate::forward_transport!(@methods @names).to_vec();
        listed.sort_unstable();
        let mut declared = methods_of_the_trait(include_str!("lib.rs"));
        declared.sort_unstable();
        assert_eq!(
            listed, declared,
            "forward_transport! (forward.rs) must list exactly the methods of `Transport` \
             (lib.rs): add the new method to its `@methods` list and give it an `@one` and an \
             `@unless_own` rule"
        );
    }

    /// A transport whose answers differ from the trait's defaults wherever it has any, so a
    /// wrapper that let a default through would be seen.
    struct Answering;

    #[async_trait::async_trait]
    impl crate::Transport for Answering {
        fn id(&self) -> &str {
            "answering"
        }
        fn capabilities(&self) -> crate::Capabilities {
            crate::Capabilities {
                threads: true,
                edit: true,
                attachments: false,
                typing: true,
                max_message_length: 10,
                length_unit: crate::LengthUnit::Chars,
                markup: crate::Markup::Plain,
                reactions: true,
                drafts: false,
            }
        }
        async fn identify(&self) -> Result<crate::BotIdentity, crate::TransportError> {
            Err(crate::TransportError::Failed("asked the inner one".into()))
        }
        async fn start(&self, _sink: crate::InboundSink) -> Result<(), crate::TransportError> {
            Ok(())
        }
        async fn stop(&self) {}
        async fn send(
            &self,
            _message: crate::OutboundMessage,
        ) -> Result<crate::SendReceipt, crate::TransportError> {
            Err(crate::TransportError::Failed(
                "sent by the inner one".into(),
            ))
        }
        async fn react(
            &self,
            _conversation_id: &str,
            _message_id: &str,
            _reaction: crate::Reaction,
            _replaces: Option<crate::Reaction>,
        ) -> Result<(), crate::TransportError> {
            Ok(())
        }
        fn max_upload_bytes(&self) -> u64 {
            7
        }
        fn topic_place(&self) -> Option<String> {
            Some("forum".into())
        }
        fn diagnose(&self) -> String {
            "inner".into()
        }
    }

    /// Writes `typing` and `diagnose` itself; the rest is the macro's.
    struct Wrapper {
        inner: Answering,
    }

    crate::forward_transport! {
        impl Transport for Wrapper => inner {
            /// Its own answer, where the inner one's is the default `Ok`.
            async fn typing(
                &self,
                conversation_id: &str,
                _thread_id: Option<&str>,
            ) -> Result<(), crate::TransportError> {
                Err(crate::TransportError::Failed(format!(
                    "typing in {conversation_id} by the wrapper"
                )))
            }

            fn diagnose(&self) -> String {
                format!("wrapped {}", self.inner.diagnose())
            }
        }
    }

    /// A wrapper that writes nothing itself: every method of the trait must come from the
    /// macro (a required one it missed would not compile).
    struct Transparent {
        inner: Answering,
    }

    crate::forward_transport! {
        impl Transport for Transparent => inner {}
    }

    #[tokio::test]
    async fn a_wrapper_answers_with_its_own_methods_and_the_inner_transport_for_the_rest() {
        use crate::Transport as _;
        let wrapper = Wrapper { inner: Answering };
        assert_eq!(
            wrapper.typing("chat", None).await,
            Err(crate::TransportError::Failed(
                "typing in chat by the wrapper".into()
            ))
        );
        assert_eq!(wrapper.diagnose(), "wrapped inner");
        // Forwarded, where the trait's defaults would say 0, None and "cannot react".
        assert_eq!(wrapper.max_upload_bytes(), 7);
        assert_eq!(wrapper.topic_place().as_deref(), Some("forum"));
        assert_eq!(
            wrapper
                .react("chat", "1", crate::Reaction::Done, None)
                .await,
            Ok(())
        );
        assert_eq!(wrapper.capabilities(), Answering.capabilities());
        assert_eq!(
            wrapper.identify().await,
            Err(crate::TransportError::Failed("asked the inner one".into()))
        );

        let transparent = Transparent { inner: Answering };
        assert_eq!(transparent.typing("chat", None).await, Ok(()));
        assert_eq!(transparent.diagnose(), "inner");
        assert_eq!(transparent.max_upload_bytes(), 7);
        assert_eq!(transparent.id(), "answering");
    }

    /// The names of the `fn`s between `pub trait Transport` and the brace that closes it.
    fn methods_of_the_trait(source: &str) -> Vec<&str> {
        let body = source
            .split_once("\npub trait Transport")
            .expect("lib.rs declares `pub trait Transport`")
            .1;
        let body = &body[..body.find("\n}").expect("the trait's closing brace")];
        body.lines()
            .filter_map(|line| {
                let line = line.trim_start();
                line.strip_prefix("async ")
                    .unwrap_or(line)
                    .strip_prefix("fn ")
            })
            .map(|after| {
                after
                    .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .next()
                    .unwrap_or_default()
            })
            .collect()
    }
}
